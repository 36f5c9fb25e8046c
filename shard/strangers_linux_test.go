package shard

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/memnet"
	"github.com/yip-router/yip-router/shard/udp"
)

// The strangers' socket is read within its budget per loop iteration (a
// flood waits in its buffer instead of taking the shard), its datagrams
// reach the handshake path as if they came on the group socket, and a busy
// loop that found it empty looks again only strangerRecheck later.
func TestReadStrangersBudget(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	strangers, err := udp.ListenLane(lo)
	if err != nil {
		t.Fatal(err)
	}
	defer strangers.Close()
	sender, err := udp.ListenLane(lo)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	var conns []int
	sd := newSide(t, 1, routesB)
	s := sd.shards[0]
	s.strangers.sock = strangers
	s.cfg.Unmatched = func(_, conn int, _ []byte, _ netip.AddrPort, _ netip.Addr) Verdict {
		conns = append(conns, conn)
		return Answered
	}
	junk := make([]byte, 1000)
	const sent = 100
	for range sent {
		if err := sender.SendTo(junk, strangers.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // loopback delivery
	s.now = time.Now()
	first := s.readUnsteered(&s.strangers, false)
	// Batches of 16, the budget (32 KiB at 1000 + 512 per datagram)
	// checked after each: two batches.
	if first == 0 || first > 2*strangerBatch {
		t.Fatalf("one iteration read %d of %d strangers' datagrams, want at most two batches", first, sent)
	}
	// With lane work in the same iteration, one batch of 8 (8 KiB).
	s.now = time.Now()
	if busy := s.readUnsteered(&s.strangers, true); busy != strangerBatch/2 {
		t.Fatalf("a busy iteration read %d strangers' datagrams, want one batch of %d", busy, strangerBatch/2)
	}
	total := first + strangerBatch/2
	for range sent {
		s.now = time.Now()
		total += s.readUnsteered(&s.strangers, false)
	}
	if total != sent || len(conns) != sent {
		t.Fatalf("read %d, handed %d to the handshake path, want %d", total, len(conns), sent)
	}
	for _, c := range conns {
		if c != 0 {
			t.Fatalf("a stranger's datagram came as conn %d, want the group socket's 0", c)
		}
	}
	s.publish()
	if sn := s.Snapshot(); sn.Get(StrangersIn) != sent {
		t.Fatalf("strangers_in %d, want %d", sn.Get(StrangersIn), sent)
	}
	// Found empty: the next look comes strangerRecheck later.
	s.now = time.Now()
	if s.readUnsteered(&s.strangers, false) != 0 {
		t.Fatal("read something from an empty socket")
	}
	if err := sender.SendTo(junk, strangers.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := s.readUnsteered(&s.strangers, false); n != 0 { // s.now unchanged: within the recheck wait
		t.Fatalf("read %d within the recheck wait", n)
	}
	s.now = s.now.Add(strangerRecheck)
	if n := s.readUnsteered(&s.strangers, false); n != 1 {
		t.Fatalf("read %d after the recheck wait, want 1", n)
	}
}

// Over its rate a queue reads nothing until its next token is due, and the
// loop's poll leaves it out meanwhile; a known socket has a rate of its
// own, so strangers that used theirs up do not hold a known address back;
// and datagrams that open under a lane's keys (a lane not steered) are not
// charged. In-memory sockets: nothing depends on the kernel's delivery.
func TestReadUnsteeredRate(t *testing.T) {
	wire := memnet.NewWire()
	listen := func(ap string) *memnet.Socket {
		c, err := wire.Listen(netip.MustParseAddrPort(ap))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	strangers, known := listen("192.0.2.1:51820"), listen("192.0.2.1:51821")
	sender := listen("198.51.100.7:40000")
	sd := newSide(t, 1, routesB)
	s := sd.shards[0]
	s.strangers.sock, s.known.sock = strangers, known
	// A datagram starting with 'L' stands for one that opened under a
	// lane's keys (ingress counts it in authed).
	s.cfg.Unmatched = func(_, _ int, d []byte, _ netip.AddrPort, _ netip.Addr) Verdict {
		if d[0] == 'L' {
			s.authed++
		}
		return Answered
	}
	send := func(to *memnet.Socket, n int, first byte) {
		for range n {
			if err := sender.SendTo(append([]byte{first}, make([]byte, 99)...), to.LocalAddr()); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(strangers, strangerBurst+50, 'x')
	send(known, 10, 'x')
	now := time.Now()
	total := 0
	for range 100 {
		s.now = now // no time passes: the burst is all there is
		total += s.readUnsteered(&s.strangers, false)
	}
	if total != strangerBurst {
		t.Fatalf("read %d strangers' datagrams at one instant, want the burst of %d", total, strangerBurst)
	}
	if s.strangers.polled(now) || !s.strangers.capped {
		t.Fatal("a queue over its rate is still polled")
	}
	if got := s.readUnsteered(&s.known, false); got != 10 {
		t.Fatalf("the known socket read %d of 10 while the strangers' was over its rate", got)
	}
	// A millisecond later: 16 more tokens.
	s.now = now.Add(time.Millisecond)
	if got := s.readUnsteered(&s.strangers, false); got != StrangerRate/1000 {
		t.Fatalf("a millisecond later read %d, want %d", got, StrangerRate/1000)
	}
	// A lane's datagrams cost no tokens: a whole burst of them, then
	// another, read at one instant.
	s.now = now.Add(time.Second) // full again; the 34 strangers left first
	total = 0
	for range 10 {
		total += s.readUnsteered(&s.strangers, false)
	}
	send(strangers, 2*strangerBurst, 'L')
	s.now = s.now.Add(strangerRecheck) // past the recheck of the empty socket
	for range 100 {
		total += s.readUnsteered(&s.strangers, false)
	}
	if want := 50 - StrangerRate/1000 + 2*strangerBurst; total != want {
		t.Fatalf("read %d, want the %d strangers left and all %d of a lane's", total, 50-StrangerRate/1000, 2*strangerBurst)
	}
	s.publish()
	if sn := s.Snapshot(); sn.Get(StrangersIn) != strangerBurst+50+2*strangerBurst || sn.Get(KnownIn) != 10 {
		t.Fatalf("strangers_in %d known_in %d", sn.Get(StrangersIn), sn.Get(KnownIn))
	}
}

// On the strangers' socket, junk and handshake messages dropped
// unanswered are charged to the rate by the bytes their mac1 checks
// hashed (the datagram less its two MACs, times the handshake keys), one
// token per junkTokenBytes, on top of the token every datagram costs. So
// at one instant a full bucket reads a third of its burst of junk whose
// checks hash 512 bytes under two keys, half under one, and all of it
// when the junk is too short to be a handshake, when the handshakes are
// answered, or on the known socket; only junk counts as dropped.
func TestReadUnsteeredPricesJunk(t *testing.T) {
	const hashed = junkTokenBytes + 32 // crypto.Mac1Covered: 512 bytes
	for _, tc := range []struct {
		keys    int
		verdict Verdict
		size    int
		known   bool
		want    int // datagrams the burst pays for
	}{
		{keys: 2, verdict: NotHandshake, size: hashed, want: strangerBurst / 3},
		{keys: 1, verdict: NotHandshake, size: hashed, want: strangerBurst / 2},
		{keys: 1, verdict: Ignored, size: hashed, want: strangerBurst / 2},
		{keys: 8, verdict: NotHandshake, size: 64, want: strangerBurst},
		{keys: 8, verdict: Answered, size: hashed, want: strangerBurst},
		{keys: 8, verdict: NotHandshake, size: hashed, known: true, want: strangerBurst},
	} {
		name := fmt.Sprintf("keys %d verdict %d size %d known %v", tc.keys, tc.verdict, tc.size, tc.known)
		wire := memnet.NewWire()
		sock, err := wire.Listen(netip.MustParseAddrPort("192.0.2.1:51820"))
		if err != nil {
			t.Fatal(err)
		}
		sender, err := wire.Listen(netip.MustParseAddrPort("198.51.100.7:40000"))
		if err != nil {
			t.Fatal(err)
		}
		s := newSide(t, 1, routesB).shards[0]
		q := &s.strangers
		if tc.known {
			q = &s.known
		}
		q.sock = sock
		s.cfg.Unmatched = func(int, int, []byte, netip.AddrPort, netip.Addr) Verdict { return tc.verdict }
		s.cfg.HandshakeKeys = func() int { return tc.keys }
		for range 2 * strangerBurst {
			if err := sender.SendTo(make([]byte, tc.size), sock.LocalAddr()); err != nil {
				t.Fatal(err)
			}
		}
		now, total := time.Now(), 0
		for range 100 {
			s.now = now
			total += s.readUnsteered(q, false)
		}
		// The last batch may go over by less than a batch: the price of
		// a batch is known once it is read.
		if total < tc.want || total >= tc.want+strangerBatch {
			t.Errorf("%s: read %d at one instant, want %d (up to a batch more)", name, total, tc.want)
		}
		if !q.capped {
			t.Errorf("%s: not capped after its burst", name)
		}
		s.publish()
		want := uint64(0)
		if tc.verdict == NotHandshake {
			want = uint64(total)
		}
		sn := s.Snapshot()
		if drops := sn.Get(DropUnknownLane); drops != want {
			t.Errorf("%s: %d of %d counted as drop_unknown_lane, want %d", name, drops, total, want)
		}
		sock.Close()
		sender.Close()
	}
}
