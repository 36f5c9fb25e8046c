package control

// The control plane's clock: handshakes for waiting traffic, retries,
// rekeys and session expiry. The lanes' own timers (loss reports,
// keepalives, liveness) run on the shards and report through events.go.

import (
	"time"

	"go.uber.org/zap"
)

// Tick runs the timers at now; package router calls it every TimerPeriod.
func (c *Core) Tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
