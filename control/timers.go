package control

// The control loop: the shards' queued events (events.go, queue.go), and
// the control plane's clock: handshakes for waiting traffic, retries,
// rekeys and session expiry. The lanes' own timers (loss reports,
// keepalives, liveness) run on the shards and report through events.go.

import (
	"time"

	"go.uber.org/zap"
)

// Step applies the events the shards queued and sends the initiations they
// call for. Package router's control loop calls it whenever Wake has a
// value; Step and Tick run on that one goroutine.
func (c *Core) Step() { c.step(time.Time{}, false) }

// Tick applies the queued events (as Step), then runs the timers at now;
// package router's control loop calls it every TimerPeriod.
func (c *Core) Tick(now time.Time) { c.step(now, true) }

// step holds the lock to apply the events and run the timers, which
// decide the initiations (initiate), and makes and sends those after it
// let go of it (sendInitiations): a step that initiates to many peers
// spends their DH without holding up the handshake path on the shards.
func (c *Core) step(now time.Time, timers bool) {
	evs, held := c.events.take()
	c.mu.Lock()
	for i := range evs {
		c.applyLocked(&evs[i])
	}
	for i := range held {
		c.applyLocked(&held[i])
	}
	if timers {
		c.timersLocked(now)
	}
	out := c.outbox
	c.outbox = nil
	c.mu.Unlock()
	c.events.recycle(evs)
	c.sendInitiations(out)
}

// timersLocked runs the timers at now. Caller holds mu.
func (c *Core) timersLocked(now time.Time) {
	c.retryKnownLocked()
	rekey := c.rekeyAfter
	for _, p := range c.peers {
		age := now.Sub(p.sessAt)
		due := !now.Before(p.nextTry)
		wanted := p.want || p.cfg.PersistentKeepalive > 0
		switch {
		case p.sess != nil && age > rejectAfterFactor*rekey:
			c.log.Info("session expired", zap.String("peer", p.cfg.PublicKey.String()))
			c.dropSession(p)
		case p.init != nil && now.Sub(p.initAt) < HandshakeTimeout && !due:
			// waiting for the response
		case p.sess != nil && p.init != nil && due && now.Sub(p.initAt) >= HandshakeTimeout && p.attempts < sessionRetries:
			// A new handshake the lanes asked for (PeerSilent), or a
			// rekey, unanswered: its response may have been lost
			// while the peer still answers under the session's keys,
			// and then nothing else asks again. The peer holds our
			// initiation's keys unconfirmed, sends under its previous
			// ones and reported nothing it received under them (a
			// bench's sender adapter stayed at its start-up guess for
			// whole runs). Retried at its backoff once the response is
			// overdue, about 90 s in all (sessionRetries), as
			// WireGuard retries a handshake every REKEY_TIMEOUT.
			c.initiate(p, now)
		case p.sess == nil && wanted && due:
			c.initiate(p, now)
		case p.sess != nil && p.initiator && age >= rekey+p.rekeyJitter && due:
			c.initiate(p, now)
		case p.sess != nil && !p.initiator && age >= rekey+rekey/responderRekeyDiv+p.rekeyJitter && wanted && due:
			// The initiator did not rekey (it may be gone): we try.
			c.initiate(p, now)
		}
		if p.want && p.sess == nil && now.Sub(p.wantSince) > wantTimeout {
			p.want = false // nobody is waiting any more
		}
	}
}
