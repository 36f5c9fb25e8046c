package udp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func recvAll(t *testing.T, c *Conn, b *Batch, want int) []netip.AddrPort {
	t.Helper()
	var from []netip.AddrPort
	deadline := time.Now().Add(2 * time.Second)
	for len(from) < want && time.Now().Before(deadline) {
		n, err := c.Recv(b, b.Len())
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			from = append(from, b.Addrs[i])
			if got := string(b.Bufs[i][:b.Sizes[i]]); got != fmt.Sprint(b.Addrs[i].Port()) {
				t.Fatalf("payload %q from %v", got, b.Addrs[i])
			}
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	return from
}

// portSocket binds a socket on addr to a random free port whose low
// LaneBits bits are lane, as a peer running the port-steering fallback's
// counterpart would.
func portSocket(t *testing.T, addr netip.Addr, lane int, rng *rand.Rand) *Conn {
	t.Helper()
	for range 64 {
		c, err := newSocket(netip.AddrPortFrom(addr, uint16(32768+(rng.IntN(28000)&^LaneMask|lane))), false)
		if err == nil {
			return c
		}
	}
	t.Fatalf("no free port for lane %d", lane)
	return nil
}

// With the port program (the fallback where eBPF is refused) a datagram
// from a port whose low bits are i reaches socket i of the group, for
// every lane, IPv4 and IPv6, and both on a dual-stack group bound to ::
// (which reports IPv4 senders unmapped): not hash luck.
func TestSteeringByLanePort(t *testing.T) {
	for _, tc := range []struct{ bind, senders string }{
		{"127.0.0.1", "127.0.0.1"}, {"::1", "::1"}, {"::", "127.0.0.1 ::1"},
	} {
		t.Run(tc.bind, func(t *testing.T) {
			const n = 4
			group, err := ListenGroup(netip.AddrPortFrom(netip.MustParseAddr(tc.bind), 0), n)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, c := range group {
					c.Close()
				}
			}()
			port := group[0].LocalAddr().Port()
			for _, c := range group {
				if c.LocalAddr().Port() != port {
					t.Fatal("group sockets on different ports")
				}
			}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			const perLane = 3 // distinct source sockets per lane and family
			senders := strings.Fields(tc.senders)
			for lane := range n {
				for k := range perLane * len(senders) {
					addr := netip.MustParseAddr(senders[k%len(senders)])
					s := portSocket(t, addr, lane, rng)
					b := NewBatch(8)
					for i := range 8 {
						b.Bufs[i] = []byte(fmt.Sprint(s.LocalAddr().Port()))
						b.Sizes[i] = len(b.Bufs[i])
						b.Addrs[i] = netip.AddrPortFrom(addr, port)
					}
					if sent, err := s.Send(b, 8); err != nil || sent != 8 {
						t.Fatalf("sent %d: %v", sent, err)
					}
					s.Close()
				}
			}
			for lane, c := range group {
				b := NewBatch(64)
				for i := range b.Bufs {
					b.Bufs[i] = make([]byte, 64)
				}
				want := perLane * len(senders) * 8
				from := recvAll(t, c, b, want)
				if len(from) != want {
					t.Fatalf("socket %d got %d datagrams, want %d", lane, len(from), want)
				}
				for _, f := range from {
					if int(f.Port())&LaneMask != lane {
						t.Fatalf("socket %d got a datagram from port %d (lane %d)", lane, f.Port(), int(f.Port())&LaneMask)
					}
					if !strings.Contains(tc.senders, f.Addr().String()) {
						t.Fatalf("datagram from %s, want one of %s (IPv4 unmapped)", f.Addr(), tc.senders)
					}
				}
				// Replies go back to both families from the one socket.
				for _, f := range from[:min(len(from), 2)] {
					if err := c.SendTo([]byte("x"), f); err != nil {
						t.Fatalf("reply to %s: %v", f, err)
					}
				}
			}
		})
	}
}

func TestGroupErrors(t *testing.T) {
	if _, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 0); err == nil {
		t.Fatal("empty group accepted")
	}
	if _, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), LaneMask+2); err == nil {
		t.Fatal("group beyond 64 sockets accepted")
	}
	a, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer a[0].Close()
	// A plain socket already on the port: the group cannot join it.
	s, err := newSocket(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := ListenGroup(s.LocalAddr(), 2); err == nil {
		t.Fatal("joined a port held by a non-reuseport socket")
	}
	// Nor may a second group join a running one (a second router).
	if _, err := ListenGroup(a[0].LocalAddr(), 1); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second group on a used port: %v", err)
	}
}

func TestBatchZeroAlloc(t *testing.T) {
	g, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer g[0].Close()
	b := NewBatch(32)
	for i := range b.Bufs {
		b.Bufs[i] = make([]byte, 1500)
		b.Sizes[i] = 100
		b.Addrs[i] = g[0].LocalAddr()
	}
	rb := NewBatch(32)
	for i := range rb.Bufs {
		rb.Bufs[i] = make([]byte, 1500)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := g[0].Send(b, 32); err != nil {
			panic(err)
		}
		for {
			n, err := g[0].Recv(rb, 32)
			if err != nil {
				panic(err)
			}
			if n == 0 {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("send+recv batch allocates %.1f", allocs)
	}
}

// A datagram the kernel refuses in the middle of a batch (here: to port 0,
// EINVAL) is skipped, the rest still go, and Send reports exactly which
// were sent: the shard counts the others as drop_send.
func TestSendRefusedMidBatch(t *testing.T) {
	g, err := ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := g[0]
	defer c.Close()
	refused := netip.MustParseAddrPort("127.0.0.1:0")
	for _, bad := range [][]int{{2}, {0}, {4}, {1, 2}, {0, 1, 2, 3, 4}} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			b := NewBatch(5)
			isBad := map[int]bool{}
			for _, i := range bad {
				isBad[i] = true
			}
			for i := range 5 {
				b.Bufs[i] = []byte(fmt.Sprint(c.LocalAddr().Port()))
				b.Sizes[i] = len(b.Bufs[i])
				b.Addrs[i] = c.LocalAddr()
				if isBad[i] {
					b.Addrs[i] = refused
				}
			}
			sent, err := c.Send(b, 5)
			if err == nil {
				t.Error("no error for a refused datagram")
			}
			if want := 5 - len(bad); sent != want {
				t.Errorf("Send reported %d sent, want %d", sent, want)
			}
			for i := range 5 {
				if b.Sent[i] == isBad[i] {
					t.Errorf("datagram %d: Sent = %v", i, b.Sent[i])
				}
			}
			rb := NewBatch(8)
			for i := range rb.Bufs {
				rb.Bufs[i] = make([]byte, 64)
			}
			got := len(recvAll(t, c, rb, 5-len(bad)))
			if more, _ := c.Recv(rb, rb.Len()); more > 0 || got != 5-len(bad) {
				t.Errorf("%d datagrams arrived, want %d", got+more, 5-len(bad))
			}
			allocs := testing.AllocsPerRun(20, func() {
				_, _ = c.Send(b, 5)
				for n, _ := c.Recv(rb, rb.Len()); n > 0; n, _ = c.Recv(rb, rb.Len()) {
				}
			})
			if allocs != 0 {
				t.Errorf("a batch with refused datagrams allocates %.1f", allocs)
			}
		})
	}
}
