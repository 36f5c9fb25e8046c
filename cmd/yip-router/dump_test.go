package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/router"
)

const (
	keyA = "rCLZjNnoAWoV4eYhQ9pc3zMg1pZ9ubamsYJ+MnJvBz8="
	keyB = "mBmoqZTD6wyA1iRGveLwZ37vIaU3NGBtaPx9bQ2F4yw="
	keyC = "aNIXAzi6ximvC5aN6U9ySX345YxOa6gtHjBu6FsZxVM="
)

func cannedStatus() *router.Status {
	return &router.Status{
		Interface: "yip0", PublicKey: keyA, ListenPort: 51820, Uptime: 3723*time.Second + 900*time.Millisecond,
		Shards: []router.ShardStatus{
			{ID: 0, CPU: 2, Counters: map[string]uint64{"udp_in": 10, "drop_no_route": 1, "drop_replay": 2}},
			{ID: 1, CPU: 3, Counters: map[string]uint64{"drop_bad_tag": 4}},
		},
		Handshakes: router.HandshakeCounts{Initiated: 5, Completed: 4, Answered: 3, CookieDemanded: 2, Refused: 1, RateLimited: 7, CookieCapped: 12},
		Offloads:   map[string]string{"udp-gro": "on", "tso": "on", "uso": "off: kernel too old", "gro": "off: disabled", "udp-gso": "on", "zz-new": "on"},
		Kernel:     router.KernelDrops{TUNTxDropped: 8, TUNRxDropped: 9, SocketDrops: 11, StrangerDrops: 13, KnownDrops: 14},
		Peers: []router.PeerStatus{
			{
				PublicKey: keyB, Endpoint: "192.0.2.2:51820", AllowedIPs: []string{"10.77.0.2/32", "192.168.2.0/24"},
				LastHandshake: time.Unix(1_800_000_000, 700_000_000), Handshakes: 6,
				RxBytes: 1000, TxBytes: 2000, RxPackets: 10, TxPackets: 20, FECRecovered: 3, FECLost: 1,
				PersistentKeepalive: 25 * time.Second,
				Lanes:               []router.LaneStatus{{Index: 0}, {Index: 1}},
			},
			{PublicKey: keyC}, // a responder-only peer that never connected
		},
	}
}

func TestDump(t *testing.T) {
	var b bytes.Buffer
	writeDump(&b, []*router.Status{cannedStatus()})
	want := "yip-router-dump\t1\n" +
		"interface\tyip0\t" + keyA + "\t51820\t2\t3723\ttso,udp-gso,udp-gro,zz-new\t5\t4\t3\t2\t1\t7\t7\t8\t9\t11\t12\t13\t14\n" +
		"peer\tyip0\t" + keyB + "\t192.0.2.2:51820\t10.77.0.2/32,192.168.2.0/24\t1800000000\t1000\t2000\t10\t20\t2\t3\t1\t6\t25\n" +
		"peer\tyip0\t" + keyC + "\t(none)\t(none)\t0\t0\t0\t0\t0\t0\t0\t0\t0\toff\n"
	if b.String() != want {
		t.Errorf("dump:\n%s\nwant:\n%s", b.String(), want)
	}
	// The column counts docs/SHOW.md promises for version 1.
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		f := strings.Split(line, "\t")
		if n := map[string]int{"interface": dumpInterfaceColumns, "peer": dumpPeerColumns}[f[0]]; len(f) != n {
			t.Errorf("%s line has %d columns, want %d", f[0], len(f), n)
		}
	}
	// No offload on, no router at all.
	st := cannedStatus()
	st.Offloads = nil
	if f := interfaceFields(st); f[6] != "(none)" {
		t.Errorf("offloads column with none on = %q", f[6])
	}
	b.Reset()
	writeDump(&b, nil)
	if b.String() != "yip-router-dump\t1\n" {
		t.Errorf("empty dump = %q", b.String())
	}
}

func TestViews(t *testing.T) {
	st := cannedStatus()
	for _, c := range []struct {
		view   string
		prefix bool
		want   string
	}{
		{"peers", false, keyB + "\n" + keyC + "\n"},
		{"endpoints", false, keyB + "\t192.0.2.2:51820\n" + keyC + "\t(none)\n"},
		{"transfer", false, keyB + "\t1000\t2000\n" + keyC + "\t0\t0\n"},
		{"latest-handshakes", false, keyB + "\t1800000000\n" + keyC + "\t0\n"},
		{"allowed-ips", false, keyB + "\t10.77.0.2/32 192.168.2.0/24\n" + keyC + "\t(none)\n"},
		{"transfer", true, "yip0\t" + keyB + "\t1000\t2000\nyip0\t" + keyC + "\t0\t0\n"},
	} {
		var b bytes.Buffer
		writeView(&b, c.view, []*router.Status{st}, c.prefix)
		if b.String() != c.want {
			t.Errorf("view %s (prefix %v):\n%q\nwant\n%q", c.view, c.prefix, b.String(), c.want)
		}
	}
}

func TestShowArgs(t *testing.T) {
	for _, args := range [][]string{
		{"yip0", "bogus"},
		{"all", "bogus"},
		{"yip0", "-i", "yip1"},
		{"peers", "endpoints"},
		{"-i", "yip0", "peers", "transfer"},
		{"--dump", "peers"},
		{"peers", "--json"},
		{"--watch", "transfer"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"show"}, args...), nil, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("show %q: exit %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
}

// `show NAME`, `show all dump` and `show NAME dump` as wg spells them: a
// leading name (or all) before or after the flags; a view's name is a view.
func TestShowTarget(t *testing.T) {
	for _, c := range []struct {
		args       []string
		name, rest string
	}{
		{nil, "", ""},
		{[]string{"wg0"}, "wg0", ""},
		{[]string{"all", "dump"}, "all", "dump"},
		{[]string{"yip1", "dump"}, "yip1", "dump"},
		{[]string{"peers"}, "", "peers"},
		{[]string{"--json", "yip0"}, "", "--json yip0"},
	} {
		name, rest := showTarget(c.args)
		if name != c.name || strings.Join(rest, " ") != c.rest {
			t.Errorf("%q: %q %q, want %q %q", c.args, name, rest, c.name, c.rest)
		}
	}
	// A name after the flags is taken too: the socket it names is looked
	// up (none runs here, so the error names it).
	var out, errb bytes.Buffer
	if code := run([]string{"show", "--json", "nosuch0"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "nosuch0") {
		t.Fatalf("show --json nosuch0: exit %d, stderr %q", code, errb.String())
	}
}

// show --json is an array for one router as for several (and for none).
func TestShowJSONOneShape(t *testing.T) {
	for _, n := range []int{0, 1, 2} {
		var all []*router.Status
		for i := range n {
			all = append(all, &router.Status{Interface: fmt.Sprintf("yip%d", i)})
		}
		var out bytes.Buffer
		writeJSON(&out, all)
		var got []router.Status
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != n {
			t.Fatalf("%d routers: %v, %d parsed from %s", n, err, len(got), out.String())
		}
	}
}

// A lane's FEC in show's text: the ratio, the loss it was sized for and
// its bursts (measured or assumed), the path, and the peer's split when it counted loss in a queue.
func TestShowFECText(t *testing.T) {
	loss := 1.02
	l := router.LaneStatus{FEC: "192:11", FECLossPct: &loss, Path: "split", RTTms: 74.2, RTTLeastMs: 51.1,
		Split: &router.LossSplit{ClearExpected: 5936, ClearLost: 57, QueuedExpected: 16308, QueuedLost: 912}}
	want := "192:11 for 1.02% loss, path split (rtt 74.2 ms, least 51.1; the peer lost 912 of 16308 in a queue, 57 of 5936 outside)"
	if got := fecText(l); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	l.Split.QueuedLost, l.Path = 168, "clear" // within the channel's share: no overflow
	if got, want := fecText(l), "192:11 for 1.02% loss, path clear (rtt 74.2 ms, least 51.1)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	one, four, measured := 1.0, 4.0, 3.84
	l.FECBurst = &one // independent: not printed
	if got, want := fecText(l), "192:11 for 1.02% loss, path clear (rtt 74.2 ms, least 51.1)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	l.FECBurst = &four
	if got, want := fecText(l), "192:11 for 1.02% loss in bursts of 4.0 (assumed), path clear (rtt 74.2 ms, least 51.1)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	l.FECBurst, l.FECBurstMeasured = &measured, true
	if got, want := fecText(l), "192:11 for 1.02% loss in bursts of 3.8, path clear (rtt 74.2 ms, least 51.1)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := fecText(router.LaneStatus{FEC: "off"}); got != "off" {
		t.Fatalf("a lane without a report: %q", got)
	}
}
