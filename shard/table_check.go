package shard

import "fmt"

// What holds in a lane table between any two of its changes (table.go), and
// check, which the tests run after every step that changes one (the shard
// fuzz targets, and every test's sides when it ends: harness_test.go). The
// table's methods keep these; code elsewhere only reads the table.
//
//  1. One owner per address: an address leads to a lane this shard owns
//     (lanes) or to a hand-over entry (foreign), never both (claim deletes
//     the entry, setForeign makes none at a bound address).
//  2. A bound lane is owned and talks to its address: lanes[a] is its peer's
//     local lane at its index, and its remote is a. So a lane is bound at
//     one address at most, whichever keys it holds (a rekey keeps the
//     lane: keyset.go). The converse does not hold: an owned lane may be
//     bound nowhere (claim.go refused it its address, or another shard's
//     claim outranked it; roam.go reaches it by trial). It holds the
//     address by a claim of this shard's (its title: claim.go), stamped
//     by this shard's clock.
//  3. owned is exactly the owned lanes: each at its slot, each its peer's
//     local lane at its index, as many as the peers' local lanes.
//  4. A peer's record is whole: its slices all have its lane count; a local
//     lane is the peer's lane at that index of that many lanes, owned here;
//     every owner is a shard of the mesh; mine is the first local lane.
//  5. Candidates are the lanes this shard does not own: cand[i] only where
//     local[i] is nil, naming that lane, at its slot in cands, and cands
//     holds no other (an owner just set to this shard may keep one until
//     its lane's install: tryCandidates hands nothing over then).
//  6. No orphan hand-over entry: every entry's peer has a record here, the
//     entry is its lane's one entry (away), it names another shard of
//     the mesh, and the lane is not owned here (install and adopt drop
//     it: dropAway). So removing a peer (or its session) finds all its
//     entries through away, without a scan of the map.
//  7. A lane the steering map is said to send here (steered) is bound: the
//     entry goes with the binding (steer.go).
//
// Across shards, what one table cannot see holds once every command the
// shards were sent has run (the control core's, and the claims' news they
// send each other: claim.go), and the tests check it then (checkTables,
// checkAddrOwners, checkHandOvers; FuzzLaneTable whenever no command is
// queued): one owner per lane; one peer per address; and every hand-over
// entry names the shard that owns its lane (setOwner re-points it when
// the lane moves).

// check reports the first way t breaks what must hold between its
// changes, or nil. It walks the whole table: for tests, not the data path.
func (t *laneTable) check() error {
	for addr, ln := range t.lanes {
		if _, ok := t.foreign[addr]; ok {
			return fmt.Errorf("%s is both a lane's and a hand-over entry", addr)
		}
		if t.local(ln.cfg.Peer, ln.cfg.Index) != ln {
			return fmt.Errorf("%s leads to lane %d of peer %d, which the shard does not own", addr, ln.cfg.Index, ln.cfg.Peer)
		}
		if ln.cfg.Remote != addr {
			return fmt.Errorf("%s leads to lane %d of peer %d, which talks to %s", addr, ln.cfg.Index, ln.cfg.Peer, ln.cfg.Remote)
		}
		if ln.title.stamp == 0 || ln.title.stamp > t.clock || ln.title.shard != t.self {
			return fmt.Errorf("%s leads to lane %d of peer %d, which holds it by no claim of this shard's (%+v)", addr, ln.cfg.Index, ln.cfg.Peer, ln.title)
		}
	}
	for i, ln := range t.owned {
		if ln == nil || ln.slot != i {
			return fmt.Errorf("owned[%d] is not at its slot", i)
		}
		if t.local(ln.cfg.Peer, ln.cfg.Index) != ln {
			return fmt.Errorf("owned[%d], lane %d of peer %d, is not the peer's lane here", i, ln.cfg.Index, ln.cfg.Peer)
		}
		if ln.steered && !t.bound(ln) {
			return fmt.Errorf("lane %d of peer %d is steered but not bound at %s", ln.cfg.Index, ln.cfg.Peer, ln.cfg.Remote)
		}
	}
	cands := 0
	for id, pl := range t.peers {
		if err := t.checkPeer(id, pl); err != nil {
			return err
		}
		for _, c := range pl.cand {
			if c != nil {
				cands++
			}
		}
	}
	if cands != len(t.cands) {
		return fmt.Errorf("%d candidates recorded, %d in cands", cands, len(t.cands))
	}
	for addr, f := range t.foreign {
		pl := t.peers[f.peer]
		switch {
		case pl == nil:
			return fmt.Errorf("hand-over entry %s names peer %d, unknown here", addr, f.peer)
		case f.index < 0 || f.index >= len(pl.away):
			return fmt.Errorf("hand-over entry %s names lane %d of peer %d's %d", addr, f.index, f.peer, len(pl.away))
		case pl.away[f.index] != addr:
			return fmt.Errorf("hand-over entry %s is not lane %d of peer %d's (%s)", addr, f.index, f.peer, pl.away[f.index])
		case f.owner == t.self || f.owner < 0 || f.owner >= t.shards:
			return fmt.Errorf("hand-over entry %s names shard %d", addr, f.owner)
		case pl.local[f.index] != nil:
			return fmt.Errorf("hand-over entry %s for lane %d of peer %d, which this shard owns", addr, f.index, f.peer)
		}
	}
	if len(t.wakes) != len(t.owned) {
		return fmt.Errorf("%d wake times for %d owned lanes", len(t.wakes), len(t.owned))
	}
	return nil
}

// checkPeer checks peer id's record (4 and 5 above).
func (t *laneTable) checkPeer(id PeerID, pl *peerLanes) error {
	n := len(pl.owners)
	if pl.id != id || n == 0 || len(pl.local) != n || len(pl.cand) != n || len(pl.away) != n {
		return fmt.Errorf("peer %d: record of peer %d, %d owners, %d local, %d cand, %d away", id, pl.id, n, len(pl.local), len(pl.cand), len(pl.away))
	}
	mine := -1
	for i, ln := range pl.local {
		if pl.owners[i] < 0 || pl.owners[i] >= t.shards {
			return fmt.Errorf("peer %d: lane %d owned by shard %d", id, i, pl.owners[i])
		}
		if c := pl.cand[i]; c != nil {
			if ln != nil {
				return fmt.Errorf("peer %d: lane %d is owned here and a candidate", id, i)
			}
			if c.peer != id || c.index != i || c.slot < 0 || c.slot >= len(t.cands) || t.cands[c.slot] != c {
				return fmt.Errorf("peer %d: lane %d's candidate is not at its slot", id, i)
			}
		}
		if ln == nil {
			continue
		}
		if mine < 0 {
			mine = i
		}
		if ln.cfg.Peer != id || ln.cfg.Index != i || ln.cfg.Lanes != n || pl.owners[i] != t.self {
			return fmt.Errorf("peer %d: local lane %d is lane %d of %d of peer %d, owner %d", id, i, ln.cfg.Index, ln.cfg.Lanes, ln.cfg.Peer, pl.owners[i])
		}
		if ln.slot < 0 || ln.slot >= len(t.owned) || t.owned[ln.slot] != ln {
			return fmt.Errorf("peer %d: local lane %d is not in owned", id, i)
		}
	}
	if pl.mine != mine {
		return fmt.Errorf("peer %d: mine is %d, the first local lane %d", id, pl.mine, mine)
	}
	return nil
}
