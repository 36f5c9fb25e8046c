package shard

import (
	"net/netip"
	"testing"
	"time"

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
	s.cfg.Strangers = strangers
	s.cfg.Unmatched = func(_, conn int, _ []byte, _ netip.AddrPort, _ netip.Addr) bool {
		conns = append(conns, conn)
		return true
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
	first := s.readStrangers(false)
	// Batches of 16, the budget (32 KiB at 1000 + 512 per datagram)
	// checked after each: two batches.
	if first == 0 || first > 2*strangerBatch {
		t.Fatalf("one iteration read %d of %d strangers' datagrams, want at most two batches", first, sent)
	}
	// With lane work in the same iteration, one batch of 8 (8 KiB).
	s.now = time.Now()
	if busy := s.readStrangers(true); busy != strangerBatch/2 {
		t.Fatalf("a busy iteration read %d strangers' datagrams, want one batch of %d", busy, strangerBatch/2)
	}
	total := first + strangerBatch/2
	for range sent {
		s.now = time.Now()
		total += s.readStrangers(false)
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
	if s.readStrangers(false) != 0 {
		t.Fatal("read something from an empty socket")
	}
	if err := sender.SendTo(junk, strangers.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := s.readStrangers(false); n != 0 { // s.now unchanged: within the recheck wait
		t.Fatalf("read %d within the recheck wait", n)
	}
	s.now = s.now.Add(strangerRecheck)
	if n := s.readStrangers(false); n != 1 {
		t.Fatalf("read %d after the recheck wait, want 1", n)
	}
}
