package udp

import (
	"bytes"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gsoPair is a sender and a receiver on loopback with the offloads asked
// for; it skips when this kernel lacks them.
func gsoPair(t *testing.T, ip string) (snd, rcv *Conn) {
	t.Helper()
	var err error
	if snd, err = ListenLane(netip.MustParseAddr(ip)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close() })
	g, err := ListenGroup(netip.AddrPortFrom(netip.MustParseAddr(ip), 0), 1)
	if err != nil {
		t.Fatal(err)
	}
	rcv = g[0]
	t.Cleanup(func() { rcv.Close() })
	if gso, _ := snd.EnableOffloads(true, false); !gso {
		t.Skip("UDP GSO not available on this kernel")
	}
	if _, gro := rcv.EnableOffloads(false, true); !gro {
		t.Skip("UDP GRO not available on this kernel")
	}
	return snd, rcv
}

// datagrams makes a batch to dst: runs of equal sizes broken by other
// sizes, each datagram's bytes telling its index.
func datagrams(dst netip.AddrPort, sizes []int) *Batch {
	b := NewBatch(len(sizes))
	for i, n := range sizes {
		b.Bufs[i] = bytes.Repeat([]byte{byte(i)}, n)
		b.Sizes[i], b.Addrs[i] = n, dst
	}
	return b
}

// receiveSplit receives until want datagrams arrived, cutting GRO messages
// by their segment size as the shard does.
func receiveSplit(t *testing.T, c *Conn, want int) (got [][]byte, coalesced int) {
	t.Helper()
	rb := NewBatch(8)
	for i := range rb.Bufs {
		rb.Bufs[i] = make([]byte, 65535)
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		n, err := c.Recv(rb, rb.Len())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
		for i := range n {
			d, seg := rb.Bufs[i][:rb.Sizes[i]], rb.Seg[i]
			if seg <= 0 || seg >= len(d) {
				seg = len(d)
			} else {
				coalesced++
			}
			for len(d) > 0 {
				k := min(seg, len(d))
				got = append(got, bytes.Clone(d[:k]))
				d = d[k:]
			}
		}
	}
	return got, coalesced
}

// Runs of equal-sized datagrams go out as GSO messages and come back as
// GRO messages; cut at the segment size they are the datagrams sent, in
// order, boundaries intact.
func TestGSOAndGRORoundTrip(t *testing.T) {
	for _, ip := range []string{"127.0.0.1", "::1"} {
		t.Run(ip, func(t *testing.T) {
			snd, rcv := gsoPair(t, ip)
			var sizes []int
			for range 20 {
				sizes = append(sizes, 1400)
			}
			sizes = append(sizes, 700, 1402, 1402, 90)
			for range 50 {
				sizes = append(sizes, 1300)
			}
			b := datagrams(rcv.LocalAddr(), sizes)
			if sent, err := snd.Send(b, len(sizes)); sent != len(sizes) || err != nil {
				t.Fatalf("sent %d of %d: %v", sent, len(sizes), err)
			}
			if !snd.GSO() {
				t.Fatalf("GSO went off: %v", snd.GSOError())
			}
			got, coalesced := receiveSplit(t, rcv, len(sizes))
			if len(got) != len(sizes) {
				t.Fatalf("%d of %d datagrams arrived", len(got), len(sizes))
			}
			for i, d := range got {
				if len(d) != sizes[i] || d[0] != byte(i) || d[len(d)-1] != byte(i) {
					t.Fatalf("datagram %d: %d bytes of %d, first byte %d", i, len(d), sizes[i], d[0])
				}
			}
			if coalesced == 0 {
				t.Error("no GRO message received: the runs were not carried as one")
			}
		})
	}
}

// A kernel that refuses GSO sends (here: SO_NO_CHECK, which UDP GSO
// rejects with EINVAL) loses nothing: the batch is sent one datagram a
// message, and GSO is off from then on, with the reason kept.
func TestGSORefusedFallsBack(t *testing.T) {
	snd, rcv := gsoPair(t, "127.0.0.1")
	if err := unix.SetsockoptInt(snd.fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
		t.Skip("SO_NO_CHECK: ", err)
	}
	sizes := []int{1000, 1000, 1000, 1000, 500}
	b := datagrams(rcv.LocalAddr(), sizes)
	if sent, _ := snd.Send(b, len(sizes)); sent != len(sizes) {
		t.Fatalf("sent %d of %d after the refusal", sent, len(sizes))
	}
	if snd.GSO() || snd.GSOError() == nil {
		t.Fatalf("GSO still on (%v) or no reason kept", snd.GSO())
	}
	if got, _ := receiveSplit(t, rcv, len(sizes)); len(got) != len(sizes) {
		t.Fatalf("%d of %d datagrams arrived", len(got), len(sizes))
	}
}

// GSO batches allocate nothing either.
func TestGSOZeroAlloc(t *testing.T) {
	snd, rcv := gsoPair(t, "127.0.0.1")
	sizes := make([]int, 32)
	for i := range sizes {
		sizes[i] = 1200
	}
	b := datagrams(rcv.LocalAddr(), sizes)
	rb := NewBatch(8)
	for i := range rb.Bufs {
		rb.Bufs[i] = make([]byte, 65535)
	}
	allocs := testing.AllocsPerRun(50, func() {
		_, _ = snd.Send(b, len(sizes))
		for n, _ := rcv.Recv(rb, rb.Len()); n > 0; n, _ = rcv.Recv(rb, rb.Len()) {
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per GSO batch", allocs)
	}
}

func TestKernelDefects(t *testing.T) {
	cases := []struct {
		rel      string
		gso, gro bool
	}{
		{"4.14.0", false, false},
		{"5.4.0-150-generic", true, false},
		{"5.12.0", true, true},
		{"6.6.30", true, true},
		{"6.18.44-fc-v782", true, true},
		{"7.0.0", false, true},
		{"7.1.4-arch1", false, true},
		{"7.1.5", true, true},
		{"7.2", true, true},
	}
	for _, c := range cases {
		r := parseRelease(c.rel)
		if gsoUsable(r) != c.gso || groUsable(r) != c.gro {
			t.Errorf("%s (%v): GSO %v GRO %v, want %v %v", c.rel, r, gsoUsable(r), groUsable(r), c.gso, c.gro)
		}
	}
}

// parseCtrl finds UDP_GRO among control messages and ignores anything
// malformed.
func TestGROSizeParse(t *testing.T) {
	seg := func(ctrl []byte, n int) int {
		s, local := parseCtrl(ctrl, n)
		if local.IsValid() {
			t.Fatalf("a local address %s in a UDP_GRO message", local)
		}
		return s
	}
	buf := make([]byte, 64)
	setSegment(buf, 1234) // a UDP_SEGMENT message: not UDP_GRO
	if seg(buf, unix.CmsgSpace(2)) != 0 {
		t.Fatal("UDP_SEGMENT read as UDP_GRO")
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&buf[0]))
	h.Type = unix.UDP_GRO
	if got := seg(buf, unix.CmsgSpace(2)); got != 1234 {
		t.Fatalf("2-byte UDP_GRO: %d", got)
	}
	h.SetLen(1000)
	if seg(buf, 64) != 0 {
		t.Fatal("over-long control message accepted")
	}
	if seg(buf, 3) != 0 {
		t.Fatal("truncated control message accepted")
	}
}

// A GSO run refused because the path MTU shrank below its segments
// (EMSGSIZE) goes out one datagram a message (the kernel fragments them)
// and GSO stays on: it says nothing about GSO.
func TestGSOSmallerPathMTUKeepsGSO(t *testing.T) {
	snd, rcv := gsoPair(t, "::1")
	if err := unix.SetsockoptInt(snd.fd, unix.IPPROTO_IPV6, unix.IPV6_MTU, 1280); err != nil {
		t.Skip("IPV6_MTU: ", err)
	}
	sizes := []int{1400, 1400, 1400, 1400}
	b := datagrams(rcv.LocalAddr(), sizes)
	if sent, err := snd.Send(b, len(sizes)); sent != len(sizes) {
		t.Fatalf("sent %d of %d: %v", sent, len(sizes), err)
	}
	if !snd.GSO() {
		t.Fatalf("GSO off after a path-MTU refusal: %v", snd.GSOError())
	}
	if got, _ := receiveSplit(t, rcv, len(sizes)); len(got) != len(sizes) {
		t.Fatalf("%d of %d datagrams arrived", len(got), len(sizes))
	}
}

// A run to a destination the kernel refuses outright (port 0: EINVAL alone
// too) is counted as not sent, and GSO stays on for everyone else.
func TestGSOBadDestinationKeepsGSO(t *testing.T) {
	snd, rcv := gsoPair(t, "127.0.0.1")
	bad := netip.MustParseAddrPort("127.0.0.1:0")
	sizes := []int{1000, 1000, 1000, 1000, 1000, 1000}
	b := datagrams(rcv.LocalAddr(), sizes)
	for i := range 3 {
		b.Addrs[i] = bad
	}
	sent, err := snd.Send(b, len(sizes))
	if sent != 3 || err == nil {
		t.Fatalf("sent %d (want 3), err %v", sent, err)
	}
	for i := range sizes {
		if b.Sent[i] != (i >= 3) {
			t.Fatalf("datagram %d: Sent %v", i, b.Sent[i])
		}
	}
	if !snd.GSO() {
		t.Fatalf("GSO off after a bad destination: %v", snd.GSOError())
	}
	if got, _ := receiveSplit(t, rcv, 3); len(got) != 3 {
		t.Fatalf("%d of 3 datagrams arrived", len(got))
	}
}
