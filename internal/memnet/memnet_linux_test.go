package memnet

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

var (
	_ shard.Socket   = (*Socket)(nil)
	_ shard.TUNQueue = (*TUN)(nil)
)

func listen(t *testing.T, w *Wire, addr string) *Socket {
	t.Helper()
	s, err := w.Listen(netip.MustParseAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readable reports whether fd polls readable at once.
func readable(t *testing.T, fd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1 && fds[0].Revents&unix.POLLIN != 0
}

func recvAll(t *testing.T, s *Socket) (data []string, from []netip.AddrPort) {
	t.Helper()
	b := udp.NewBatch(8)
	for i := range b.Bufs {
		b.Bufs[i] = make([]byte, 64)
	}
	for {
		n, err := s.Recv(b, b.Len())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return data, from
		}
		for i := range n {
			data = append(data, string(b.Bufs[i][:b.Sizes[i]]))
			from = append(from, b.Addrs[i])
		}
	}
}

// A socket's fd is readable exactly while datagrams wait; they arrive in
// order, from the sender's address, in a batch.
func TestSocketBatches(t *testing.T) {
	w := NewWire()
	a, b := listen(t, w, "192.0.2.1:1000"), listen(t, w, "192.0.2.2:2000")
	if readable(t, b.Fd()) {
		t.Fatal("empty socket readable")
	}
	tx := udp.NewBatch(4)
	for i, m := range []string{"one", "two", "three"} {
		tx.Bufs[i], tx.Sizes[i], tx.Addrs[i] = []byte(m), len(m), b.LocalAddr()
	}
	if n, err := a.Send(tx, 3); n != 3 || err != nil || !tx.Sent[2] {
		t.Fatalf("Send = %d, %v", n, err)
	}
	copy(tx.Bufs[0], "zzz") // overwriting what was sent changes nothing: the wire copied it
	if !readable(t, b.Fd()) {
		t.Fatal("socket with datagrams not readable")
	}
	data, from := recvAll(t, b)
	if got := []string{"one", "two", "three"}; !slices.Equal(data, got) || from[0] != a.LocalAddr() {
		t.Fatalf("got %q from %v", data, from)
	}
	if readable(t, b.Fd()) {
		t.Fatal("drained socket readable")
	}
	if st := w.Stats(); st.Delivered != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// Sockets at one address are a group steered by source port (low bits),
// else by a hash of the source: one source always reaches one member.
func TestGroupBySourcePort(t *testing.T) {
	w := NewWire()
	g := []*Socket{listen(t, w, "192.0.2.2:51820"), listen(t, w, "192.0.2.2:51820")}
	for i := range 2 {
		c := listen(t, w, netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(40000+i)).String())
		c.SendTo([]byte{byte(i)}, g[0].LocalAddr())
	}
	for i, s := range g {
		if data, _ := recvAll(t, s); len(data) != 1 || data[0] != string([]byte{byte(i)}) {
			t.Fatalf("member %d got %q", i, data)
		}
	}
	far := listen(t, w, "192.0.2.1:40005") // low bits 5: no such member
	for range 3 {
		far.SendTo([]byte("x"), g[0].LocalAddr())
	}
	n0, _ := recvAll(t, g[0])
	n1, _ := recvAll(t, g[1])
	if len(n0)+len(n1) != 3 || (len(n0) != 0 && len(n1) != 0) {
		t.Fatalf("one source split over the group: %d and %d", len(n0), len(n1))
	}
}

// Move: a host's datagrams come from its new address, datagrams to the new
// address reach it, datagrams to the old one are lost; Move back undoes it.
func TestMove(t *testing.T) {
	w := NewWire()
	a, b := listen(t, w, "192.0.2.1:1000"), listen(t, w, "192.0.2.2:2000")
	oldA, newA := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("203.0.113.7")
	w.Move(oldA, newA)
	a.SendTo([]byte("hi"), b.LocalAddr())
	if _, from := recvAll(t, b); len(from) != 1 || from[0] != netip.AddrPortFrom(newA, 1000) {
		t.Fatalf("from %v", from)
	}
	b.SendTo([]byte("new"), netip.AddrPortFrom(newA, 1000))
	b.SendTo([]byte("old"), a.LocalAddr())
	if data, _ := recvAll(t, a); !slices.Equal(data, []string{"new"}) {
		t.Fatalf("a got %q", data)
	}
	if st := w.Stats(); st.Unreachable != 1 {
		t.Fatalf("stats %+v", st)
	}
	w.Move(oldA, oldA)
	b.SendTo([]byte("back"), a.LocalAddr())
	if data, _ := recvAll(t, a); !slices.Equal(data, []string{"back"}) {
		t.Fatalf("a got %q after moving back", data)
	}
}

// Spaced loses one datagram of each path in every gap of lo to hi,
// counted per path; lo = hi loses every lo-th.
func TestSpaced(t *testing.T) {
	w := NewWire()
	w.Lose(Spaced(4, 4, 1))
	a, b, c := listen(t, w, "192.0.2.1:1"), listen(t, w, "192.0.2.2:2"), listen(t, w, "192.0.2.3:3")
	for i := range 8 {
		a.SendTo([]byte{byte(i)}, b.LocalAddr())
		a.SendTo([]byte{byte(i)}, c.LocalAddr())
	}
	for _, s := range []*Socket{b, c} {
		data, _ := recvAll(t, s)
		if want := []string{"\x00", "\x01", "\x02", "\x04", "\x05", "\x06"}; !slices.Equal(data, want) {
			t.Fatalf("got %q, want %q", data, want)
		}
	}
	if st := w.Stats(); st.Lost != 4 || st.Delivered != 12 {
		t.Fatalf("stats %+v", st)
	}

	// Varied gaps: never closer than lo, about 2/(lo+hi) in all.
	lose, last, lost := Spaced(15, 25, 7), 0, 0
	d := Datagram{From: a.LocalAddr(), To: b.LocalAddr()}
	for i := 1; i <= 20000; i++ {
		if lose(d) {
			if last > 0 && i-last < 15 {
				t.Fatalf("losses %d and %d closer than 15", last, i)
			}
			last = i
			lost++
		}
	}
	if lost < 900 || lost > 1100 {
		t.Fatalf("lost %d of 20000, want about 1000", lost)
	}
}

// Reorder holds a datagram back until the next of its path is delivered;
// other paths pass it.
func TestReorder(t *testing.T) {
	w := NewWire()
	a, b, c := listen(t, w, "192.0.2.1:1"), listen(t, w, "192.0.2.2:2"), listen(t, w, "192.0.2.3:3")
	w.Reorder(func(d Datagram) bool { return string(d.Data) == "1" })
	for _, m := range []string{"0", "1"} {
		a.SendTo([]byte(m), b.LocalAddr())
	}
	a.SendTo([]byte("x"), c.LocalAddr()) // another path: releases nothing
	if data, _ := recvAll(t, b); !slices.Equal(data, []string{"0"}) {
		t.Fatalf("b got %q before the next datagram of the path", data)
	}
	a.SendTo([]byte("2"), b.LocalAddr())
	if data, _ := recvAll(t, b); !slices.Equal(data, []string{"2", "1"}) {
		t.Fatalf("b got %q, want 2 then 1", data)
	}
	if st := w.Stats(); st.Reordered != 1 || st.Delivered != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// A TUN queue: injected packets are read in order while its fd is
// readable; written packets are taken.
func TestTUN(t *testing.T) {
	q, err := NewTUN()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Inject([]byte("p1"))
	q.Inject([]byte("p2"))
	buf := make([]byte, 16)
	for _, want := range []string{"p1", "p2"} {
		if !readable(t, q.Fd()) {
			t.Fatal("queue with packets not readable")
		}
		n, err := q.Read(buf)
		if err != nil || string(buf[:n]) != want {
			t.Fatalf("Read = %q, %v", buf[:n], err)
		}
	}
	if n, _ := q.Read(buf); n != 0 || readable(t, q.Fd()) {
		t.Fatal("empty queue read something or is readable")
	}
	w := []byte("out")
	q.Write(w)
	w[0] = 'X'
	if got := q.Take(); len(got) != 1 || !bytes.Equal(got[0], []byte("out")) || len(q.Take()) != 0 {
		t.Fatalf("Take = %q", got)
	}
}
