package router

import (
	"bytes"
	mrand "math/rand/v2"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

// unmatched is the shards' hook for datagrams that match no lane (or fail
// its tag): handshakes are recognised and answered here, on the shard that
// received them, so handshake work spreads over all cores.
func (r *Router) unmatched(sh, conn int, data []byte, from netip.AddrPort) bool {
	typ, idx := r.local.Classify(data)
	switch typ {
	case crypto.TypeInitiation:
		r.handleInitiation(sh, conn, data, from)
		return true
	case crypto.TypeResponse:
		return r.handleResponse(idx, data, from)
	}
	return r.handleCookieReply(data, from)
}

// replyAllowed says whether a cookie reply may go to addr: always to a
// peer's known address, else while this second's replies to unknown
// sources are under cookieReplyCap.
func (r *Router) replyAllowed(addr netip.Addr, now time.Time) bool {
	if _, ok := r.known.Load(addr); ok {
		return true
	}
	if advanceSlot(&r.replySlot, now.Unix()) {
		r.replyCount.Store(0)
	}
	return r.replyCount.Add(1) <= cookieReplyCap
}

// setEndpoint changes p's endpoint and keeps the set of peers' endpoint
// addresses (known) in step: O(1), where rebuilding the set on every
// handshake made a 10,000-peer hub spend half its CPU on it. Caller holds
// r.mu.
func (r *Router) setEndpoint(p *peer, ep netip.AddrPort) {
	if old := p.endpoint; old.IsValid() {
		a := old.Addr()
		if r.knownRefs[a]--; r.knownRefs[a] <= 0 {
			delete(r.knownRefs, a)
			r.known.Delete(a)
		}
	}
	p.endpoint = ep
	if ep.IsValid() {
		a := ep.Addr()
		if r.knownRefs[a]++; r.knownRefs[a] == 1 {
			r.known.Store(a, struct{}{})
		}
	}
}

// underLoad counts initiations per second across shards.
func (r *Router) underLoad(now time.Time) bool {
	if advanceSlot(&r.initSlot, now.Unix()) {
		r.initCount.Store(0)
	}
	return r.initCount.Add(1) > cookieThreshold
}

// advanceSlot moves a per-second counter's slot forward to slot and reports
// whether this caller moved it (and so resets the count). A shard whose
// clock reading is a moment older never moves it back: that reset the
// count, letting more initiations through than the threshold.
func advanceSlot(cur *atomic.Int64, slot int64) bool {
	for {
		old := cur.Load()
		if slot <= old {
			return false
		}
		if cur.CompareAndSwap(old, slot) {
			return true
		}
	}
}

func (r *Router) conn(sh, conn int) *udp.Conn {
	if conn == connLane {
		return r.laneSk[sh]
	}
	return r.group[sh]
}

// sendHS sends a handshake datagram from shard sh's socket conn.
func (r *Router) sendHS(sh, conn int, b []byte, to netip.AddrPort) error {
	if r.testSend != nil {
		return r.testSend(sh, conn, b, to)
	}
	return r.conn(sh, conn).SendTo(b, to)
}

func (r *Router) handleInitiation(sh, conn int, data []byte, from netip.AddrPort) {
	now := time.Now()
	if conn < 0 {
		conn = connGroup
	}
	// Who may cost us a DH. Nothing unproven is charged to a bucket that a
	// proven source depends on, so spoofers cannot lock a real peer out:
	//   - not under load (global rate under the threshold) and the source
	//     prefix's unproven bucket has a token: answer, charging it;
	//   - otherwise demand a cookie: a valid mac2 proves the initiator
	//     receives at its address, and it is charged to the prefix's proven
	//     bucket, which spoofed initiations never touch;
	//   - no valid mac2: a cookie reply (never longer than the initiation),
	//     so a real peer whose prefix is being spoofed retries with mac2.
	loaded := r.underLoad(now)
	switch {
	case !loaded && r.limit.allow(from.Addr(), now):
	case r.cookies.CheckMac2(data, from, now):
		if !r.proven.allow(from.Addr(), now) {
			r.hs.rateLimited.Add(1)
			return
		}
	default:
		if !r.replyAllowed(from.Addr(), now) {
			r.hs.cookiesCapped.Add(1)
			return
		}
		reply, err := r.local.CookieReplyClassified(data, r.cookies, from, now)
		if err == nil {
			_ = r.sendHS(sh, conn, reply, from)
			r.hs.cookies.Add(1)
		}
		return
	}
	inc, err := r.local.ConsumeInitiation(data)
	if err != nil {
		r.hs.refused.Add(1)
		r.log.Debug("initiation refused", zap.Stringer("from", from), zap.Error(err))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.peers[inc.Peer().PublicKey()]
	if p == nil {
		r.hs.refused.Add(1)
		return
	}
	// Both sides initiating at once would each end up with the session of
	// its own initiation. The side with the smaller public key keeps its
	// initiation and ignores the other's; the larger one answers and
	// abandons its own.
	if p.init != nil && now.Sub(p.initAt) < handshakeTimeout {
		ours := r.local.PublicKey()
		if bytes.Compare(ours[:], p.cfg.PublicKey[:]) < 0 {
			r.log.Debug("crossing initiations: keeping ours", zap.String("peer", p.cfg.PublicKey.String()))
			return
		}
		r.clearInit(p)
	}
	ports := make([]uint16, len(r.shards))
	for i := range ports {
		ports[i] = r.group[0].LocalAddr().Port()
	}
	index := randUint32()
	resp, sess, err := inc.Respond(index, crypto.LaneOffer{Ports: ports})
	if err != nil {
		r.hs.refused.Add(1)
		return
	}
	// Lanes first, then the response: the initiator sends data as soon
	// as it has the response. Our own initiation, however old, is
	// abandoned: a late response to it must not replace the session both
	// sides are about to agree on.
	r.clearInit(p)
	p.attempts = 0
	r.setEndpoint(p, from)
	// The initiation came from the initiator's socket of lane From: that
	// lane is at the source as seen (a NAT may have rewritten the port)
	// and arrives on this shard; the other lanes' ports are as offered.
	offered := slices.Clone(sess.Remote.Ports)
	k := sess.Remote.From
	if k < min(len(r.shards), sess.Remote.Lanes()) {
		sess.Remote.Ports[k] = from.Port()
	} else {
		// Sent from a lane this session will not run: handshakes go to
		// lane 0's address, which it does.
		k = -1
		r.setEndpoint(p, netip.AddrPortFrom(from.Addr(), offered[0]))
	}
	p.endpointLane = max(k, 0)
	r.install(p, sess, offered, from.Addr(), sh, k, now)
	if err := r.sendHS(sh, conn, resp, from); err != nil {
		r.log.Warn("sending handshake response", zap.Stringer("to", from), zap.Error(err))
	}
	r.hs.answered.Add(1)
	r.log.Info("handshake answered", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("from", from), zap.Int("lanes", p.lanes))
}

// handleResponse reads a response to one of our pending initiations. Anyone
// who saw the initiation and holds our public key can send one with a valid
// mac1 and index, so the reads are rate-limited per initiation and done
// outside the router lock (the Initiation serialises them and survives a
// failed one).
func (r *Router) handleResponse(idx uint32, data []byte, from netip.AddrPort) bool {
	if r.npending.Load() == 0 {
		// Nothing of ours is pending: a response (anyone holding our
		// public key can make one) costs no router lock.
		return false
	}
	now := time.Now()
	r.mu.Lock()
	p := r.pending[idx]
	if p == nil || p.init == nil || p.initIndex != idx {
		r.mu.Unlock()
		return false
	}
	in := p.init
	if !p.respReads.take(now, respRate, respBurst) {
		r.mu.Unlock()
		r.hs.rateLimited.Add(1)
		return true
	}
	r.mu.Unlock()
	sess, err := in.ConsumeResponse(data)
	if err != nil {
		r.hs.refused.Add(1)
		r.log.Debug("response refused", zap.Stringer("from", from), zap.Error(err))
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.init != in {
		return true // replaced or abandoned while we read it
	}
	r.clearInit(p)
	p.attempts = 0
	r.setEndpoint(p, from)
	r.install(p, sess, nil, from.Addr(), -1, -1, now)
	p.endpointLane = 0
	r.hs.completed.Add(1)
	r.log.Info("handshake completed", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("endpoint", from), zap.Int("lanes", p.lanes))
	return true
}

// handleCookieReply tries data as a cookie reply to our pending
// initiations sent to from. Garbage floods come through here, so it costs
// O(1) and never takes the router lock: a length test, then only the
// initiations sent to that exact endpoint are tried.
func (r *Router) handleCookieReply(data []byte, from netip.AddrPort) bool {
	if !crypto.CookieReplyLen(len(data)) || r.npending.Load() == 0 {
		return false
	}
	var buf [4]*crypto.Initiation
	r.pendMu.Lock()
	cands := append(buf[:0], r.byEndpoint[from]...)
	r.pendMu.Unlock()
	now := time.Now()
	for _, in := range cands {
		r.cookieScans.Add(1)
		// The cookie is kept for the next attempt, which comes on the
		// normal schedule (as in WireGuard): a reply anyone on the path
		// could forge must not cancel the initiation or bring the retry
		// forward.
		if in.ConsumeCookieReply(data, now) == nil {
			return true
		}
	}
	return false
}

// install gives the session's lanes to the shards, and every other shard
// learns each lane's owner and receive keys. As initiator (arrived < 0)
// lane i goes to shard i, which owns the lane socket its datagrams come
// back to. As responder lane i goes where it was before a rekey (p.place),
// and lane fromLane (the one whose socket sent the initiation; -1: none
// this session runs) to the shard the initiation arrived on (arrived):
// its datagrams come from the same socket through the same NAT mapping.
// Caller holds r.mu.
func (r *Router) install(p *peer, sess *crypto.Session, offered []uint16, remoteIP netip.Addr, arrived, fromLane int, now time.Time) {
	lanes := min(len(r.shards), sess.Remote.Lanes())
	encCfg, mode := r.fecConfig()
	if p.sess != nil && p.lanes != lanes {
		r.dropSession(p)
	}
	initiator := arrived < 0
	conn := connGroup
	if initiator {
		conn = connLane
	}
	if initiator || len(p.place) != lanes {
		p.place = make([]int, lanes)
		for i := range p.place {
			p.place[i] = i
		}
	}
	if !initiator && fromLane >= 0 && arrived != p.place[fromLane] {
		// The sending lane goes where its datagrams arrive; the lane
		// there, if any, takes its old shard.
		for i, o := range p.place {
			if o == arrived {
				p.place[i] = p.place[fromLane]
			}
		}
		p.place[fromLane] = arrived
	}
	for i := range lanes {
		remote := netip.AddrPortFrom(remoteIP, sess.Remote.Ports[i])
		recv := sess.Keys.RecvLane(i)
		lc := shard.LaneConfig{
			Peer: p.id, Index: i, Lanes: lanes, Remote: remote, Conn: conn,
			Send: sess.Keys.SendLane(i), Recv: recv,
			FEC: encCfg, Mode: mode, HoldTx: !initiator,
			Keepalive: p.cfg.PersistentKeepalive,
		}
		if i < len(offered) && offered[i] != remote.Port() {
			lc.Offered = netip.AddrPortFrom(remoteIP, offered[i])
		}
		owner := p.place[i]
		r.shards[owner].Do(func(s *shard.Shard) {
			if err := s.InstallLane(lc); err != nil {
				r.log.Error("install lane", zap.Int("lane", i), zap.Error(err))
				return
			}
			if initiator {
				// As WireGuard: confirm the new keys at once, so
				// the responder stops sending under the old ones
				// even if we have nothing to send.
				s.SendKeepalive(lc.Peer, lc.Index)
			}
		})
		for j, s := range r.shards {
			if j == owner {
				continue
			}
			id, idx := p.id, i
			s.Do(func(sh *shard.Shard) { sh.SetLaneOwner(id, lanes, idx, owner, remote, &recv) })
		}
	}
	// Shards beyond the lane count still read TUN packets for the peer:
	// they learn the owners too (done above for every j).
	p.sess, p.sessAt, p.lanes, p.remoteIP, p.initiator = sess, now, lanes, remoteIP, initiator
	// Rekeys come at no fixed period either: up to a tenth later.
	p.rekeyJitter = time.Duration(mrand.Int64N(int64(r.rekeyAfter()/10) + 1))
	p.want = false
	p.lastHS = now
	p.nHS++
}

// clearInit forgets p's pending initiation. Caller holds r.mu.
func (r *Router) clearInit(p *peer) {
	if p.init != nil {
		delete(r.pending, p.initIndex)
		r.pendMu.Lock()
		var rest []*crypto.Initiation
		for _, in := range r.byEndpoint[p.initTo] {
			if in != p.init {
				rest = append(rest, in)
			}
		}
		if len(rest) == 0 {
			delete(r.byEndpoint, p.initTo)
		} else {
			r.byEndpoint[p.initTo] = rest
		}
		r.pendMu.Unlock()
		p.init = nil
	}
	r.npending.Store(int32(len(r.pending)))
}

// noSession is the shards' hook: traffic waits for p. The timers start the
// handshake (not here: this runs on a shard).
func (r *Router) noSession(_ int, id shard.PeerID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.byID[id]; p != nil && !p.want {
		p.want = true
		p.wantSince = time.Now()
	}
}

// initiate sends an initiation to p. Caller holds r.mu.
func (r *Router) initiate(p *peer, now time.Time) {
	if !p.endpoint.IsValid() {
		return // responder-only peer: it must come to us
	}
	ports := make([]uint16, len(r.laneSk))
	for i, c := range r.laneSk {
		ports[i] = c.LocalAddr().Port()
	}
	r.clearInit(p)
	// From a random lane's socket: its port steers the initiation to that
	// lane's shard on the responder, so a hub's handshakes spread over its
	// shards, and no single port starts every session. Retries keep the
	// lane: a cookie is bound to the source port it was sent to.
	if p.attempts == 0 || p.fromLane >= len(ports) {
		p.fromLane = randIntn(len(ports))
	}
	fromLane := p.fromLane
	index := randUint32()
	for r.pending[index] != nil {
		// Responses find their initiation by this index: another
		// pending initiation's must not be overwritten.
		index = randUint32()
	}
	in, dgram, err := r.local.Initiate(p.cp, index, crypto.LaneOffer{Ports: ports, From: fromLane}, now)
	if err != nil {
		r.log.Error("initiate", zap.Error(err))
		return
	}
	p.init, p.initIndex, p.initAt, p.initTo = in, index, now, p.endpoint
	p.respReads = bucket{tokens: respBurst, last: now}
	r.pending[index] = p
	r.pendMu.Lock()
	r.byEndpoint[p.endpoint] = append(r.byEndpoint[p.endpoint], in)
	r.pendMu.Unlock()
	r.npending.Store(int32(len(r.pending)))
	p.attempts++
	// Backoff with jitter: 1, 2, 4, 8 s … capped at 15 s, ±10%.
	back := time.Second << min(p.attempts-1, 4)
	back = min(back, 15*time.Second)
	back += time.Duration(randIntn(int(back/5)+1)) - back/10
	p.nextTry = now.Add(back)
	if err := r.sendHS(fromLane, connLane, dgram, p.endpoint); err != nil {
		r.log.Debug("sending initiation", zap.Stringer("to", p.endpoint), zap.Error(err))
	}
	r.hs.initiated.Add(1)
}

// timers runs the control plane's clock: handshakes for waiting traffic,
// retries, rekeys and session expiry. Loss reports, keepalives and the
// liveness check are the lanes' own (shard/control.go), which report a
// silent peer (peerSilent) and a moved one (peerMoved) as events.
func (r *Router) timers() {
	t := time.NewTicker(timerPeriod)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.tick(now)
		}
	}
}

// peerMoved runs on shard sh's goroutine when an authenticated datagram
// moved lane index of peer to a new address. A new IP means the peer moved:
// its lanes on the other shards follow at once (same ports). The endpoint
// for handshakes follows lane 0, which talks to it (the responder's
// listening port, or the initiator's lane-0 socket as the NAT shows it),
// or the new IP; on another goroutine, so the shard never waits for the
// router lock. The shard list never changes, so reading it needs no lock.
func (r *Router) peerMoved(sh int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	if from.Addr() != to.Addr() {
		for i, s := range r.shards {
			if i != sh {
				s.Do(func(x *shard.Shard) { x.FollowPeer(peer, from.Addr(), to.Addr()) })
			}
		}
	}
	go func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.byID[peer]
		if p == nil {
			return
		}
		ep := p.endpoint
		switch {
		case index == p.endpointLane && ep == from:
			ep = to
		case ep.Addr() == from.Addr():
			ep = netip.AddrPortFrom(to.Addr(), ep.Port())
		default:
			return
		}
		if ep != p.endpoint {
			r.log.Info("peer roamed", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("from", p.endpoint), zap.Stringer("to", ep))
			r.setEndpoint(p, ep)
		}
	}()
}

// peerSilent runs on shard sh's goroutine when a lane of peer has been
// sending without hearing back for noReplyAfter (shard/control.go): the
// peer presumably restarted and lost its keys, so a new handshake starts
// (unless one is under way or backing off). On another goroutine: the
// shard never waits for the router lock.
func (r *Router) peerSilent(sh int, peer shard.PeerID) {
	go func() {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.byID[peer]
		if p == nil || p.sess == nil || (p.init != nil && now.Sub(p.initAt) < handshakeTimeout) || now.Before(p.nextTry) {
			return
		}
		r.log.Info("peer stopped answering; new handshake", zap.String("peer", p.cfg.PublicKey.String()), zap.Int("shard", sh))
		r.initiate(p, now)
	}()
}

// laneMisplaced runs on shard from's goroutine when lane index of peer,
// which it owns, proved to receive its datagrams on shard via (a NAT
// rewrote the lane's port): the lane moves there, so its datagrams stop
// taking a ring hop. On another goroutine: the shard never waits for the
// router lock.
func (r *Router) laneMisplaced(from int, peer shard.PeerID, index, via int) {
	go func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.byID[peer]
		if p == nil || p.sess == nil || p.initiator || index >= len(p.place) || p.place[index] != from || via < 0 || via >= len(r.shards) {
			return
		}
		p.place[index] = via
		lanes, to := p.lanes, r.shards[via]
		r.log.Debug("lane moves to the shard its datagrams arrive on", zap.String("peer", p.cfg.PublicKey.String()),
			zap.Int("lane", index), zap.Int("from", from), zap.Int("to", via))
		r.shards[from].Do(func(s *shard.Shard) { s.MoveLane(peer, index, to) })
		for j, s := range r.shards {
			if j != from && j != via {
				s.Do(func(sh *shard.Shard) { sh.SetLaneOwner(peer, lanes, index, via, netip.AddrPort{}, nil) })
			}
		}
	}()
}

func (r *Router) tick(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rekey := r.rekeyAfter()
	for _, p := range r.peers {
		age := now.Sub(p.sessAt)
		switch {
		case p.sess != nil && age > rejectAfterFactor*rekey:
			r.log.Info("session expired", zap.String("peer", p.cfg.PublicKey.String()))
			r.dropSession(p)
		case p.init != nil && now.Sub(p.initAt) < handshakeTimeout && now.Before(p.nextTry):
			// waiting for the response
		case p.sess == nil && (p.want || p.cfg.PersistentKeepalive > 0) && !now.Before(p.nextTry):
			r.initiate(p, now)
		case p.sess != nil && p.initiator && age >= rekey+p.rekeyJitter && !now.Before(p.nextTry):
			r.initiate(p, now)
		case p.sess != nil && !p.initiator && age >= rekey+rekey/4+p.rekeyJitter && (p.want || p.cfg.PersistentKeepalive > 0) && !now.Before(p.nextTry):
			// The initiator did not rekey (it may be gone): we try.
			r.initiate(p, now)
		}
		if p.want && p.sess == nil && now.Sub(p.wantSince) > 90*time.Second {
			p.want = false // nobody is waiting any more
		}
	}
}
