package router

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/shard"
)

// The wiring between the control core and the shards: the shards' hooks
// into the core (withCore) and the loop that runs the core (controlLoop).
// The core reaches the shards through their group (shard.Group, its
// DataPlane).

// withCore is a shard's Config with its hooks into the control core c:
// the handshake path and the lane events. New wires every shard through
// it, and the pair test (pair_test.go) its in-memory ones.
func withCore(cfg shard.Config, c *control.Core) shard.Config {
	// The handshake path: it takes the core's lock only for a handshake
	// message that passed its mac1.
	cfg.Unmatched = c.Unmatched
	cfg.HandshakeKeys = c.HandshakeKeys
	// Lane events: queued for the control loop without the core's lock,
	// so a shard never waits for it.
	cfg.NoSession = c.NoSession
	cfg.Moved = func(sh int, p shard.PeerID, i int, from, to netip.AddrPort) {
		c.FollowMoved(sh, p, i, from, to) // the other shards follow now, in order
		c.PeerMoved(sh, p, i, from, to)
	}
	cfg.Silent = c.PeerSilent
	cfg.Misplaced = c.LaneMisplaced
	cfg.Confirmed = c.LaneConfirmed
	return cfg
}

// controlLoop is the core's only caller of Step and Tick: the shards'
// lane events as they come (Wake), the timers at each tick, until stop.
// Start runs it on a ticker every control.TimerPeriod; the pair test
// sends its fake clock's times.
func controlLoop(c *control.Core, stop <-chan struct{}, ticks <-chan time.Time) {
	for {
		select {
		case <-stop:
			return
		case <-c.Wake():
			c.Step()
		case now := <-ticks:
			c.Tick(now)
		}
	}
}
