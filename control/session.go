package control

// Sessions: starting a handshake (initiate), forgetting a pending one
// (clearInit), and installing a completed session's lanes on the shards
// (install).

import (
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// install gives the session's lanes to the shards (shard.Group decides
// where: shard.Placement), and every other shard learns each lane's owner
// and receive keys. p.place is where the lanes were before a rekey, and
// becomes where they are. arrived is the shard a responder's initiation
// arrived on (-1 as initiator), fromLane the lane whose socket sent it
// (-1: none this session runs). proven is the address the handshake
// itself showed the peer at (as initiator: the response came from where
// the initiation went; invalid otherwise): a lane there takes it from any
// other peer (shard.LaneConfig). local is the address a responder's
// initiation arrived at, which its lanes send from (zero: the routing
// table's choice). Caller holds c.mu.
func (c *Core) install(p *peer, sess *crypto.Session, offered []uint16, remoteIP netip.Addr, proven netip.AddrPort, local netip.Addr, arrived, fromLane int, now time.Time) {
	lanes := min(c.shards, sess.Remote.Lanes())
	encCfg, mode := c.fecConfig()
	if p.sess != nil && p.lanes != lanes {
		c.dropSession(p)
	}
	initiator := arrived < 0
	s := shard.Session{Peer: p.id, Lanes: make([]shard.LaneConfig, lanes), Place: p.place, Arrived: arrived, FromLane: fromLane}
	for i := range lanes {
		remote := netip.AddrPortFrom(remoteIP, sess.Remote.Ports[i])
		recv := sess.Keys.RecvLane(i)
		send := sess.Keys.SendLane(i)
		c.logLaneKeys(p, i, &send, &recv)
		s.Lanes[i] = shard.LaneConfig{
			Peer: p.id, Index: i, Lanes: lanes, Remote: remote,
			Send: send, Recv: recv,
			FEC: encCfg, Mode: mode, HoldTx: !initiator, RTT: p.rtt,
			Keepalive: p.cfg.PersistentKeepalive, Lens: p.lens, Bursts: p.bursts,
			Proven: proven.IsValid() && remote == proven, Local: local,
			Asked: !initiator && i == fromLane,
		}
		if i < len(offered) && offered[i] != remote.Port() {
			s.Lanes[i].Offered = netip.AddrPortFrom(remoteIP, offered[i])
		}
	}
	p.place = c.dp.InstallSession(s)
	if p.failing {
		p.failing = false
		c.log.Info("handshakes with peer work again", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("endpoint", p.endpoint))
	}
	p.sess, p.sessAt, p.lanes, p.remoteIP, p.initiator = sess, now, lanes, remoteIP, initiator
	p.gen++
	// Rekeys come at no fixed period either: up to a tenth later.
	p.rekeyJitter = time.Duration(c.rnd.IntN(int(c.rekeyAfter/rekeyJitterDiv) + 1))
	p.want = false
	p.lastHS = now
	p.nHS++
}

// clearInit forgets p's pending initiation. Caller holds c.mu.
func (c *Core) clearInit(p *peer) {
	if p.init != nil {
		delete(c.pending, p.initIndex)
		c.pendMu.Lock()
		var rest []*crypto.Initiation
		for _, in := range c.byEndpoint[p.initTo] {
			if in != p.init {
				rest = append(rest, in)
			}
		}
		if len(rest) == 0 {
			delete(c.byEndpoint, p.initTo)
		} else {
			c.byEndpoint[p.initTo] = rest
		}
		c.pendMu.Unlock()
		p.init = nil
	}
	c.npending.Store(int32(len(c.pending)))
}

// initPlan is an initiation initiate decided under the lock, whose
// message sendInitiations makes outside it.
type initPlan struct {
	p     *peer
	cp    *crypto.Peer
	gen   uint64 // p.gen when decided
	index uint32
	offer crypto.LaneOffer
	at    time.Time
}

// initiate decides an initiation to p: the lane it leaves from, its
// index, the attempt count and the backoff to the next one; the control
// loop's step makes and sends it once it let go of the lock
// (sendInitiations). Until then p's previous initiation, if any, stays
// pending. Caller holds c.mu, on the control loop's goroutine.
func (c *Core) initiate(p *peer, now time.Time) {
	if !p.endpoint.IsValid() {
		return // responder-only peer: it must come to us
	}
	ports := c.dp.LanePorts()
	// From a random lane's socket: no single port starts every session,
	// and a responder that steers by port spreads a hub's handshakes over
	// its shards (steering by lane remote, the kernel's hash spreads a
	// first initiation; a rekey's goes to the lane's shard). Retries keep
	// the lane: a cookie is bound to the source port it was sent to.
	if p.attempts == 0 || p.fromLane >= len(ports) {
		p.fromLane = c.rnd.IntN(len(ports))
	}
	if p.attempts > 0 && p.lens != nil {
		// Unanswered: the peer may now run a router that drops long
		// initiations.
		p.lens.SetLong(false)
	}
	index := c.rnd.Uint32()
	for c.pending[index] != nil {
		// Responses find their initiation by this index: another
		// pending initiation's must not be overwritten.
		index = c.rnd.Uint32()
	}
	p.attempts++
	if p.attempts == failWarnAttempts+1 && !p.failing {
		p.failing = true
		c.log.Warn("handshakes with peer keep failing: no response to initiations for 15 s; check that it runs, that its Endpoint is right and that UDP to it passes",
			zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("endpoint", p.endpoint), zap.Int("attempts", p.attempts-1))
	}
	// Backoff with jitter: 1, 2, 4, 8 s … capped at 15 s, ±10%.
	back := min(retryFirst<<min(p.attempts-1, 4), retryMax)
	back += time.Duration(c.rnd.IntN(int(2*back/retryJitterDiv)+1)) - back/retryJitterDiv
	p.nextTry = now.Add(back)
	c.outbox = append(c.outbox, initPlan{p: p, cp: p.cp, gen: p.gen, index: index,
		offer: crypto.LaneOffer{Ports: ports, From: p.fromLane}, at: now})
}

// sendInitiations makes the planned initiations (a DH each) without the
// lock, then takes it to make them pending and send them. A plan whose
// peer changed meanwhile is dropped: a handshake installed a session (a
// response to the previous initiation, or the peer's own initiation
// answered on a shard), the session was dropped, or a reload removed the
// peer or changed its key or PSK. The next tick decides again.
func (c *Core) sendInitiations(plans []initPlan) {
	if len(plans) == 0 {
		return
	}
	ins := make([]*crypto.Initiation, len(plans))
	dgrams := make([][]byte, len(plans))
	for i, pl := range plans {
		in, dgram, err := c.local.Initiate(pl.cp, pl.index, pl.offer, pl.at)
		if err != nil {
			c.log.Error("initiate", zap.Error(err))
			continue
		}
		ins[i], dgrams[i] = in, dgram
	}
	if c.afterDH != nil {
		c.afterDH()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, pl := range plans {
		p, in := pl.p, ins[i]
		if in == nil || c.peers[p.cfg.PublicKey] != p || p.cp != pl.cp || p.gen != pl.gen ||
			c.pending[pl.index] != nil || !p.endpoint.IsValid() {
			if c.peers[p.cfg.PublicKey] == p && p.attempts > 0 {
				// Not sent: it is no attempt (the warning after
				// unanswered ones counts what went out), and the next
				// tick decides again instead of after a backoff.
				p.attempts--
				p.nextTry = pl.at
			}
			continue
		}
		c.clearInit(p)
		p.init, p.initIndex, p.initAt, p.initTo = in, pl.index, pl.at, p.endpoint
		p.respReads = bucket{tokens: respBurst, last: pl.at}
		c.pending[pl.index] = p
		c.pendMu.Lock()
		c.byEndpoint[p.endpoint] = append(c.byEndpoint[p.endpoint], in)
		c.pendMu.Unlock()
		c.npending.Store(int32(len(c.pending)))
		// The round trip counts from here: the step made the messages of
		// every peer it initiates to before the first left.
		p.initSent = c.now()
		if err := c.dp.SendHandshake(pl.offer.From, ConnLane, dgrams[i], p.endpoint, netip.Addr{}); err != nil {
			c.log.Debug("sending initiation", zap.Stringer("to", p.endpoint), zap.Error(err))
		}
		c.hs.initiated.Add(1)
	}
}

// sessionLog is the level a completed handshake of p is logged at: INFO
// for a new session, DEBUG for a rekey of a working one (every two
// minutes per peer: 720 lines a day each at INFO). Call it before install.
// Caller holds c.mu.
func (c *Core) sessionLog(p *peer) func(string, ...zap.Field) {
	if p.sess != nil && !p.failing {
		return c.log.Debug
	}
	return c.log.Info
}
