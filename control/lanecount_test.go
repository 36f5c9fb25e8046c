package control

import (
	"testing"
	"time"
)

// A peer that restarted with fewer shards offers fewer lanes: its old
// session's lanes are removed before the new ones go in, so none of the
// old lanes outlives its keys.
func TestFewerLanesRemovesOldLanes(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 2, 2)
	handshake(t, ini, resp)
	rp := resp.peerOf(t)
	var lanes int
	resp.locked(func() { lanes = rp.lanes })
	if lanes != 2 || resp.plane.removed[rp.id] != 0 {
		t.Fatalf("first session: %d lanes, %d removals", lanes, resp.plane.removed[rp.id])
	}
	ini.clock.Advance(time.Second) // the restarted initiator's timestamp is newer
	ini2 := restarted(t, ini, resp)
	handshake(t, ini2, resp)
	resp.locked(func() { lanes = rp.lanes })
	if lanes != 1 || resp.plane.removed[rp.id] != 1 || !sessionsAgree(t, ini2, resp) {
		t.Fatalf("after the restart with one shard: %d lanes, %d removals", lanes, resp.plane.removed[rp.id])
	}
}
