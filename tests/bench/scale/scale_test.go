package main

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	yipconfig "github.com/yip-router/yip-router/config"

	"github.com/yip-router/yip-router/crypto"
)

func TestChecksum(t *testing.T) {
	// RFC 1071's example: the one's-complement sum of these words is
	// 0xddf2, so the checksum is its complement.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := checksum(b); got != ^uint16(0xddf2) {
		t.Fatalf("checksum = %#04x, want %#04x", got, ^uint16(0xddf2))
	}
	// A header with its checksum filled in sums to zero; odd lengths pad.
	if got := checksum([]byte{0xff}); got != ^uint16(0xff00) {
		t.Fatalf("odd length: %#04x", got)
	}
}

func TestEchoRequestAndReply(t *testing.T) {
	src, dst := innerAddr(41), hubInner.Addr()
	buf := make([]byte, 256)
	pkt := echoRequest(buf, src, dst, 41, 7, []byte("payload!"))
	if len(pkt) != 20+8+8 || checksum(pkt[:20]) != 0 || checksum(pkt[20:]) != 0 {
		t.Fatalf("request %x: bad length or checksums", pkt)
	}
	if pkt[9] != protoICMP || pkt[20] != icmpEcho || binary.BigEndian.Uint16(pkt[2:]) != uint16(len(pkt)) {
		t.Fatalf("request %x: bad fields", pkt)
	}
	// The kernel's reply: addresses swapped, type 0, checksums redone.
	rep := bytes.Clone(pkt)
	copy(rep[12:16], pkt[16:20])
	copy(rep[16:20], pkt[12:16])
	rep[10], rep[11] = 0, 0
	binary.BigEndian.PutUint16(rep[10:], checksum(rep[:20]))
	rep[20], rep[22], rep[23] = icmpEchoReply, 0, 0
	binary.BigEndian.PutUint16(rep[22:], checksum(rep[20:]))
	if err := parseEchoReply(rep, dst, src, 41, 7); err != nil {
		t.Fatal(err)
	}
	if parseEchoReply(rep, dst, src, 41, 8) == nil {
		t.Fatal("wrong sequence accepted")
	}
	if parseEchoReply(pkt, src, dst, 41, 7) == nil {
		t.Fatal("an echo request accepted as reply")
	}
	rep[30] ^= 1
	if parseEchoReply(rep, dst, src, 41, 7) == nil {
		t.Fatal("bad ICMP checksum accepted")
	}
}

func TestAddressing(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for _, i := range []int{0, 1, 255, 256, 9999, maxPeers - 1} {
		a := underlayAddr(i)
		if !underlayNet.Contains(a) {
			t.Fatalf("peer %d: %s outside %s", i, a, underlayNet)
		}
		p, _ := a.Prefix(24)
		if seen[p] {
			t.Fatalf("peer %d shares %s", i, p)
		}
		seen[p] = true
		if hubInner.Contains(innerAddr(i)) {
			t.Fatalf("peer %d's inner %s inside the hub's %s", i, innerAddr(i), hubInner)
		}
	}
	if underlayNet.Contains(underlayAddr(maxPeers)) {
		t.Fatalf("maxPeers %d does not fill %s", maxPeers, underlayNet)
	}
	if underlayAddr(0) != netip.MustParseAddr("100.64.0.1") || underlayAddr(300) != netip.MustParseAddr("100.65.44.1") {
		t.Fatalf("underlay: %s, %s", underlayAddr(0), underlayAddr(300))
	}
	if innerAddr(0) != netip.MustParseAddr("10.100.0.1") || innerAddr(256) != netip.MustParseAddr("10.100.1.1") {
		t.Fatalf("inner: %s, %s", innerAddr(0), innerAddr(256))
	}
	if genPort&63 != 0 || peerPort(5, 2, true)&63 != 1 || peerPort(5, 2, false) != genPort {
		t.Fatal("ports: lane bits wrong")
	}
}

// The generated configuration passes the router's own parser: every
// peer's AllowedIPs is its /32, none overlaps, and the override applies.
func TestHubConfigParses(t *testing.T) {
	priv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	pubs := make([]crypto.PublicKey, 300)
	for i := range pubs {
		k, err := crypto.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		pubs[i] = k.Public()
	}
	b := hubConfig("yscale0", priv, hubPort, "127.0.0.1:9586", pubs, map[int]netip.Prefix{0: reloadInner})
	cfg, err := yipconfig.Parse("hub.conf", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Peers) != len(pubs) || cfg.Interface.ListenPort != hubPort || cfg.Interface.MetricsListen != "127.0.0.1:9586" {
		t.Fatalf("parsed %d peers, port %d, metrics %q", len(cfg.Peers), cfg.Interface.ListenPort, cfg.Interface.MetricsListen)
	}
	if got := cfg.Peers[0].AllowedIPs; len(got) != 1 || got[0] != reloadInner {
		t.Fatalf("peer 0 AllowedIPs %v, want %s", got, reloadInner)
	}
	if got := cfg.Peers[299].AllowedIPs; len(got) != 1 || got[0] != netip.PrefixFrom(innerAddr(299), 32) {
		t.Fatalf("peer 299 AllowedIPs %v", got)
	}
}

func TestParseStatCPU(t *testing.T) {
	line := "1234 (yip router) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 9 0 100 0 0\n"
	got, err := parseStatCPU(line)
	if err != nil || got != 3.25 {
		t.Fatalf("parseStatCPU = %v, %v; want 3.25", got, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Fatal("garbage parsed")
	}
}

func TestParseSnmp(t *testing.T) {
	s := "Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 2 3 9 3\n"
	m := parseSnmp(s, "Udp:")
	if m["InDatagrams"] != 10 || m["RcvbufErrors"] != 3 || len(m) != 5 {
		t.Fatalf("parseSnmp = %v", m)
	}
	d := diffMap(map[string]int64{"a": 1, "b": 2}, map[string]int64{"a": 1, "b": 5})
	if len(d) != 1 || d["b"] != 3 {
		t.Fatalf("diffMap = %v", d)
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-2,5,1")
	if err != nil || len(got) != 4 || got[0] != 0 || got[3] != 5 {
		t.Fatalf("parseCPUList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPercentilesTimeline(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p99, mx := percentiles(ds)
	if p50 != 50 || p99 != 99 || mx != 100 {
		t.Fatalf("percentiles = %v %v %v", p50, p99, mx)
	}
	if a, b, c := percentiles(nil); a != 0 || b != 0 || c != 0 {
		t.Fatal("empty percentiles")
	}
	tl := timeline([]time.Duration{0, 100 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Second, 900 * time.Millisecond}, time.Second)
	if len(tl) != 3 || tl[0] != 2 || tl[1] != 1 || tl[2] != 1 {
		t.Fatalf("timeline = %v", tl)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second} {
		for range 20 {
			if d := backoff(n); d < want*9/10 || d > want*11/10 {
				t.Fatalf("backoff(%d) = %s, want %s ±10%%", n, d, want)
			}
		}
	}
}

func TestParseRxQueue(t *testing.T) {
	s := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		" 1: 0100A8C0:CA6C 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 1 2 0\n" +
		" 2: 0100A8C0:CA6C 00000000:0000 07 00000000:00000100 00:00000000 00000000     0        0 1 2 0\n" +
		" 3: 0100A8C0:0035 00000000:0000 07 00000000:00000100 00:00000000 00000000     0        0 1 2 0\n"
	if got := parseRxQueue(s, 51820); got != 0xa00+0x100 {
		t.Fatalf("parseRxQueue = %#x", got)
	}
}
