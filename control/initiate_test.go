package control

import (
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/testclock"
)

// scripted is seeded randomness whose first Uint32 draws are given.
type scripted struct {
	seeded
	next []uint32
}

func (s *scripted) Uint32() uint32 {
	if len(s.next) > 0 {
		v := s.next[0]
		s.next = s.next[1:]
		return v
	}
	return s.seeded.Uint32()
}

// A session index drawn again while an initiation holds it is drawn anew:
// responses find their initiation by index, so the second peer's
// initiation goes out under another and both handshakes complete.
func TestPendingIndexDrawnAgain(t *testing.T) {
	clock := testclock.New(epoch)
	m := newMemCore(t, "198.51.100.7:40000", 1, clock)
	m.rnd = &scripted{seeded: m.rnd.(seeded), next: []uint32{42, 42, 43}}
	r1 := newMemCore(t, "192.0.2.1:51820", 1, clock)
	r2 := newMemCore(t, "192.0.2.2:51820", 1, clock)
	var peers []config.Peer
	for i, r := range []*memCore{r1, r2} {
		peers = append(peers, config.Peer{PublicKey: r.local.PublicKey(), Endpoint: r.addr,
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, 0, byte(2 + i)}), 32)}})
		if err := r.SetPeers([]config.Peer{{PublicKey: m.local.PublicKey(),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SetPeers(peers); err != nil {
		t.Fatal(err)
	}
	var p1, p2 *peer
	m.locked(func() { p1, p2 = m.peers[r1.local.PublicKey()], m.peers[r2.local.PublicKey()] })
	m.kickPeer(p1) // index 42
	first := m.take()
	m.kickPeer(p2) // 42 again: pending, so 43
	second := m.take()
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("%d and %d initiations, want one each", len(first), len(second))
	}
	var i1, i2 uint32
	m.locked(func() { i1, i2 = p1.initIndex, p2.initIndex })
	if i1 != 42 || i2 != 43 {
		t.Fatalf("initiation indices %d and %d, want 42 and 43", i1, i2)
	}
	for i, r := range []*memCore{r1, r2} {
		r.deliver(append(first, second...), m.addr, ConnGroup)
		m.deliver(r.take(), r.addr, ConnLane)
		if n := m.Counts().Completed; n != uint64(i+1) {
			t.Fatalf("after %v's response: %d handshakes completed, want %d", r.addr, n, i+1)
		}
	}
	for _, pi := range m.Peers() {
		if !pi.Session {
			t.Fatalf("peer %v has no session", pi.Endpoint)
		}
	}
}
