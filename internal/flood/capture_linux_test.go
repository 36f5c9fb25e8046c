package flood

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

func TestCaptureDatagrams(t *testing.T) {
	a, b := netip.MustParseAddrPort("172.31.250.1:40000"), netip.MustParseAddrPort("172.31.250.2:47133")
	o := &CaptureOptions{Src: a.Addr(), Port: b.Port()}
	pkt := func(n int, src, dst netip.AddrPort) []byte {
		return UDPPacket(make([]byte, 28+n), src, dst, make([]byte, n))
	}
	for _, c := range []struct {
		name string
		p    []byte
		want int
	}{
		{"datagram", pkt(1000, a, b), 1},
		{"other source", pkt(1000, netip.MustParseAddrPort("172.31.250.9:40000"), b), 0},
		{"other port", pkt(1000, a, netip.MustParseAddrPort("172.31.250.2:9")), 0},
		{"over 1500 bytes", pkt(1600, a, b), 0},
		{"too short", pkt(1000, a, b)[:27], 0},
	} {
		if got := len(o.datagrams(c.p)); got != c.want {
			t.Errorf("%s: %d datagrams, want %d", c.name, got, c.want)
		}
	}

	// With SplitGSO each read starts with a virtio_net_hdr, then the
	// Ethernet header.
	o.SplitGSO = true
	vnet := func(gsoType uint8, size uint16, p []byte) []byte {
		h := make([]byte, vnetHdrLen+ethHdrLen)
		h[1] = gsoType
		binary.NativeEndian.PutUint16(h[4:], size)
		binary.BigEndian.PutUint16(h[vnetHdrLen+12:], 0x0800)
		return append(h, p...)
	}
	if got := o.datagrams(vnet(vnetGSOUDPL4, 1200, pkt(3000, a, b))); len(got) != 3 || len(got[2]) != 28+600 {
		t.Fatalf("a GSO run of 3000 bytes in 1200: %d datagrams", len(got))
	}
	if got := o.datagrams(vnet(0, 0, pkt(1000, a, b))); len(got) != 1 || len(got[0]) != 1028 {
		t.Fatalf("a plain datagram behind a vnet header: %d", len(got))
	}
	if got := o.datagrams(vnet(0, 0, pkt(3000, a, b))); len(got) != 0 {
		t.Fatal("a 3000-byte packet without GSO taken")
	}
	arp := vnet(0, 0, pkt(1000, a, b))
	binary.BigEndian.PutUint16(arp[vnetHdrLen+12:], 0x0806)
	if got := o.datagrams(arp); len(got) != 0 {
		t.Fatal("a frame of another ethertype taken")
	}
	buf := vnet(vnetGSOUDPL4, 1200, pkt(3000, a, b))
	got := o.datagrams(buf)
	clear(buf)
	if got[0][0] != 0x45 {
		t.Fatal("datagrams alias the read buffer")
	}
}

// A capture on a real veth (root only): a UDP GSO run of 3200 bytes in
// segments of 1000 and a plain datagram of 500, sent from one namespace
// to another, come out as the five datagrams they stand for.
func TestCaptureOnVeth(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	id := fmt.Sprint(os.Getpid() % 1000000)
	nsA, nsB := "yflA-"+id, "yflB-"+id
	for _, ns := range []string{nsA, nsB} {
		if err := netns.Add(ns); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = netns.Del(ns) }()
	}
	if err := netns.Veth(nsA, "yfla"+id, "172.31.252.1/24", nsB, "yflb"+id, "172.31.252.2/24"); err != nil {
		t.Fatal(err)
	}
	src, dst := netip.MustParseAddr("172.31.252.1"), netip.MustParseAddrPort("172.31.252.2:47133")
	// Someone listens, so no port unreachable refuses the second write.
	err := netns.Do(nsB, func() error {
		ln, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(dst))
		if err == nil {
			t.Cleanup(func() { ln.Close() })
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	o := CaptureOptions{NS: nsB, Ifname: "yflb" + id, Src: src, Port: dst.Port(), N: 5, Timeout: 5 * time.Second, SplitGSO: true}
	split, err := StartCapture(o)
	if err != nil {
		t.Fatal(err)
	}
	o.SplitGSO, o.Timeout = false, 2*time.Second
	plain, err := StartCapture(o)
	if err != nil {
		t.Fatal(err)
	}
	run := make([]byte, 3200)
	for i := range run {
		run[i] = byte(i * 7)
	}
	single := bytes.Repeat([]byte{0xab}, 500)
	err = netns.Do(nsA, func() error {
		conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer conn.Close()
		rc, err := conn.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) }); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("UDP_SEGMENT: %w", serr)
		}
		if _, err := conn.Write(run); err != nil {
			return err
		}
		_, err = conn.Write(single)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := split.Wait()
	plain.Stop()
	if len(got) != 5 {
		t.Fatalf("captured %d datagrams, want 5", len(got))
	}
	var joined []byte
	for i, d := range got[:4] {
		if want := 28 + min(1000, 3200-1000*i); len(d) != want {
			t.Fatalf("datagram %d: %d bytes, want %d", i, len(d), want)
		}
		joined = append(joined, d[28:]...)
	}
	if !bytes.Equal(joined, run) || !bytes.Equal(got[4][28:], single) {
		t.Fatal("the datagrams do not carry what was sent")
	}
	// Without SplitGSO the run, if it crossed the veth as one packet, is
	// skipped.
	t.Logf("without SplitGSO the capture took %d datagrams", len(plain.Wait()))
}
