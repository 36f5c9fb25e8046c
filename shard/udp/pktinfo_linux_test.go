package udp

import (
	"net/netip"
	"testing"
	"time"
)

// recvOne waits for one datagram on c and returns it with its source and
// the local address Recv reported.
func recvOne(t *testing.T, c *Conn) (string, netip.AddrPort, netip.Addr) {
	t.Helper()
	b := NewBatch(4)
	for i := range b.Bufs {
		b.Bufs[i] = make([]byte, 2048)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n, err := c.Recv(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return string(b.Bufs[0][:b.Sizes[0]]), b.Addrs[0], b.Local[0]
		}
	}
	t.Fatal("nothing received")
	return "", netip.AddrPort{}, netip.Addr{}
}

// A socket bound to the wildcard address with EnablePktinfo reports the
// local address each datagram was sent to, and answers from it — by
// SendFrom and by a batched Send — where without it the routing table
// picks the source: on a host with several addresses (here 127.0.0.1 and
// 127.0.0.2 on lo), the one a peer asked is the one it hears back from.
// IPv4, IPv6 and IPv4 on a dual-stack socket.
func TestPktinfoAnswersFromAskedAddress(t *testing.T) {
	for _, tc := range []struct{ bind, peer, asked string }{
		{"0.0.0.0", "127.0.0.1", "127.0.0.2"},
		{"::", "127.0.0.1", "127.0.0.2"},
		{"::", "::1", "::1"},
	} {
		t.Run(tc.bind+"-"+tc.asked, func(t *testing.T) {
			srv, err := newSocket(netip.AddrPortFrom(netip.MustParseAddr(tc.bind), 0), false)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			if err := srv.EnablePktinfo(); err != nil {
				t.Fatal(err)
			}
			cli, err := newSocket(netip.AddrPortFrom(netip.MustParseAddr(tc.peer), 0), false)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			asked := netip.AddrPortFrom(netip.MustParseAddr(tc.asked), srv.LocalAddr().Port())
			if err := cli.SendTo([]byte("ask"), asked); err != nil {
				t.Fatal(err)
			}
			msg, from, local := recvOne(t, srv)
			if msg != "ask" || local != asked.Addr() {
				t.Fatalf("got %q, local %s, want %s", msg, local, asked.Addr())
			}
			if err := srv.SendFrom([]byte("one"), from, local); err != nil {
				t.Fatal(err)
			}
			if msg, src, _ := recvOne(t, cli); msg != "one" || src != asked {
				t.Fatalf("SendFrom: %q from %s, want from %s", msg, src, asked)
			}
			b := NewBatch(2)
			for i := range 2 {
				b.Bufs[i], b.Sizes[i], b.Addrs[i], b.Local[i] = []byte("two"), 3, from, local
			}
			if n, err := srv.Send(b, 2); n != 2 || err != nil {
				t.Fatalf("Send: %d sent, %v", n, err)
			}
			for range 2 {
				if msg, src, _ := recvOne(t, cli); msg != "two" || src != asked {
					t.Fatalf("Send: %q from %s, want from %s", msg, src, asked)
				}
			}
		})
	}
}

// A local address the host no longer has (renumbered, failed over) is not
// the end of the lane: the datagram goes from the routing table's choice,
// and Send reports the address gone (Batch.LocalGone).
func TestPktinfoLocalGone(t *testing.T) {
	for _, bind := range []string{"0.0.0.0", "::"} {
		srv, err := newSocket(netip.AddrPortFrom(netip.MustParseAddr(bind), 0), false)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if err := srv.EnablePktinfo(); err != nil {
			t.Fatal(err)
		}
		cli, err := newSocket(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 0), false)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		gone := netip.MustParseAddr("192.0.2.77") // not this host's
		b := NewBatch(2)
		for i := range 2 {
			b.Bufs[i], b.Sizes[i], b.Addrs[i], b.Local[i] = []byte("two"), 3, cli.LocalAddr(), gone
		}
		if n, err := srv.Send(b, 2); n != 2 {
			t.Fatalf("%s: Send with a gone local address: %d sent, %v", bind, n, err)
		}
		if b.LocalGone != gone {
			t.Fatalf("%s: LocalGone %v, want %v", bind, b.LocalGone, gone)
		}
		for range 2 {
			if msg, _, _ := recvOne(t, cli); msg != "two" {
				t.Fatalf("%s: got %q", bind, msg)
			}
		}
		if err := srv.SendFrom([]byte("one"), cli.LocalAddr(), gone); err != nil {
			t.Fatalf("%s: SendFrom a gone address: %v", bind, err)
		}
		if msg, _, _ := recvOne(t, cli); msg != "one" {
			t.Fatalf("%s: got %q", bind, msg)
		}
	}
}
