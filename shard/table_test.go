package shard

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/fec"
)

// checkTables fails t if a lane table of sd breaks what must hold between
// its changes (laneTable.check). quiet: no shard has a command queued (a
// move or a new owner in flight), so no lane may have two owners either.
func checkTables(t testing.TB, when string, sd *side, quiet bool) {
	t.Helper()
	type laneID struct {
		peer  PeerID
		index int
	}
	ownerOf := map[laneID]int{}
	for i, s := range sd.shards {
		if err := s.table.check(); err != nil {
			t.Fatalf("%s: shard %d: %v", when, i, err)
		}
		for _, ln := range s.table.owned {
			id := laneID{ln.cfg.Peer, ln.cfg.Index}
			if o, ok := ownerOf[id]; ok && quiet {
				t.Fatalf("%s: lane %d of peer %d is owned by shards %d and %d", when, id.index, id.peer, o, i)
			}
			ownerOf[id] = i
		}
	}
}

// checkAddrOwners fails t if an address is bound to lanes of two peers on
// shards of sd: one peer per address across the shards, which holds once
// every claim's news (claim.go) has reached every shard. A test that
// leaves news queued on a shard may see an address a claim there would
// give up.
func checkAddrOwners(t testing.TB, when string, sd *side) {
	t.Helper()
	peerAt := map[netip.AddrPort]PeerID{}
	for _, s := range sd.shards {
		for addr, ln := range s.table.lanes {
			if p, ok := peerAt[addr]; ok && p != ln.cfg.Peer {
				t.Fatalf("%s: %s is bound to peers %d and %d", when, addr, p, ln.cfg.Peer)
			}
			peerAt[addr] = ln.cfg.Peer
		}
	}
}

// checkHandOvers fails t if a hand-over entry of a shard of sd names a
// shard that does not own the entry's lane. Only when no command is
// queued: a move or a new owner in flight has not reached every shard.
func checkHandOvers(t testing.TB, when string, sd *side) {
	t.Helper()
	for i, s := range sd.shards {
		for addr, f := range s.table.foreign {
			if sd.shards[f.owner].table.local(f.peer, f.index) == nil {
				t.Fatalf("%s: shard %d's hand-over entry %s names shard %d for lane %d of peer %d, which it does not own", when, i, addr, f.owner, f.index, f.peer)
			}
		}
	}
}

// checkAtEnd checks the sides' lane tables (checkTables, checkAddrOwners)
// when the test ends, whatever it did to them through the shards' methods.
func checkAtEnd(t testing.TB, sides ...*side) {
	t.Cleanup(func() {
		for _, sd := range sides {
			checkTables(t, "when the test ended", sd, true)
			checkAddrOwners(t, "when the test ended", sd)
		}
	})
}

// check catches a table broken in each way it checks for: no corruption
// below goes unreported, and an intact table passes.
func TestTableCheckCatches(t *testing.T) {
	for _, c := range []struct {
		name, want string
		break_     func(tb *laneTable)
	}{
		{"intact", "", func(*laneTable) {}},
		{"address with a lane and a hand-over entry", "both a lane's and a hand-over entry", func(tb *laneTable) {
			tb.foreign[addrA] = foreignLane{owner: 1, peer: 1, index: 1}
		}},
		{"address bound to a lane not owned", "which the shard does not own", func(tb *laneTable) {
			stray := *tb.lanes[addrA]
			tb.lanes[addrA] = &stray
		}},
		{"lane bound away from its remote", "which talks to", func(tb *laneTable) {
			tb.lanes[addrEvil] = tb.lanes[addrA]
		}},
		{"bound lane without a claim", "by no claim of this shard's", func(tb *laneTable) {
			tb.lanes[addrA].title = title{}
		}},
		{"owned lane missing from owned", "not in owned", func(tb *laneTable) {
			tb.owned = tb.owned[:0]
		}},
		{"owned lane no longer the peer's", "is not the peer's lane here", func(tb *laneTable) {
			delete(tb.lanes, addrA)
			tb.peers[1].local[0] = nil
		}},
		{"wake times out of step with owned", "wake times", func(tb *laneTable) {
			tb.wakes = tb.wakes[:0]
		}},
		{"owned out of slot", "not at its slot", func(tb *laneTable) {
			tb.owned[0].slot = 5
		}},
		{"orphan hand-over entry, unknown peer", "unknown here", func(tb *laneTable) {
			tb.foreign[addrEvil] = foreignLane{owner: 1, peer: 9, index: 0}
		}},
		{"orphan hand-over entry, not its lane's", "is not lane 1 of peer 1's", func(tb *laneTable) {
			tb.peers[1].away[1] = netip.AddrPort{}
		}},
		{"hand-over entry naming this shard", "names shard 0", func(tb *laneTable) {
			for a, f := range tb.foreign {
				f.owner = 0
				tb.foreign[a] = f
			}
		}},
		{"hand-over entry for a lane owned here", "which this shard owns", func(tb *laneTable) {
			tb.foreign[addrEvil] = foreignLane{owner: 1, peer: 1, index: 0}
			tb.peers[1].away[0] = addrEvil
		}},
		{"candidate for an owned lane", "owned here and a candidate", func(tb *laneTable) {
			pl := tb.peers[1]
			c := &candidate{peer: 1, index: 0, slot: len(tb.cands)}
			pl.cand[0], tb.cands = c, append(tb.cands, c)
		}},
		{"candidate missing from cands", "candidate is not at its slot", func(tb *laneTable) {
			tb.cands = tb.cands[:0]
		}},
		{"stray candidate in cands", "candidates recorded", func(tb *laneTable) {
			tb.cands = append(tb.cands, &candidate{peer: 1, index: 1, slot: len(tb.cands)})
		}},
		{"mine not the first local lane", "mine is 1", func(tb *laneTable) {
			tb.peers[1].mine = 1
		}},
		{"owner outside the mesh", "owned by shard 7", func(tb *laneTable) {
			tb.peers[1].owners[1] = 7
		}},
		{"steered but not bound", "steered but not bound", func(tb *laneTable) {
			ln := tb.lanes[addrA]
			delete(tb.lanes, addrA)
			ln.steered = true
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := newSide(t, 2, routesA), newSide(t, 2, routesB)
			connect(t, a, b, fec.EncoderConfig{K: 4})
			tb := &b.shards[0].table // owns lane 0 at addrA; lane 1 is shard 1's
			if err := tb.check(); err != nil {
				t.Fatalf("before: %v", err)
			}
			c.break_(tb)
			err := tb.check()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("intact table: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("check = %v, want an error saying %q", err, c.want)
			}
		})
	}
}
