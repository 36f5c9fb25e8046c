package control

// Handshake datagrams that reach the core: initiations (answered, or met
// with a cookie reply under load), responses to our initiations, and
// cookie replies. They arrive on the shard goroutines through Unmatched.

import (
	"bytes"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// Unmatched is the shards' hook for datagrams that match no lane (or fail
// its tag), on socket conn of shard sh (conn < 0: handed over by another
// shard): handshakes are recognised and answered here, on the shard that
// received them, so handshake work spreads over all cores. It reports
// what data was (shard.Verdict). local is the address data was
// sent to (zero: unknown): answers go out from it, and a responder's
// lanes send from it (shard.LaneConfig.Local), so a peer that asked one of
// this host's addresses hears back from that address.
func (c *Core) Unmatched(sh, conn int, data []byte, from netip.AddrPort, local netip.Addr) shard.Verdict {
	typ, idx, key := c.local.Classify(data)
	switch typ {
	case crypto.TypeInitiation:
		return c.handleInitiation(sh, conn, data, key, from, local)
	case crypto.TypeResponse:
		return c.handleResponse(idx, data, from)
	}
	if c.handleCookieReply(data, from) {
		return shard.Answered
	}
	return shard.NotHandshake
}

// HandshakeKeys is how many keys Unmatched checks a datagram of handshake
// length under (a keyed BLAKE2s each) before it finds it matches none.
func (c *Core) HandshakeKeys() int { return c.local.HandshakeKeys() }

// replyAllowed says whether a cookie reply may go to addr: always to a
// peer's known address, else while this second's replies to unknown
// sources are under cookieReplyCap. A reply's length comes from the
// built-in distribution, never from a peer's length sample: anyone behind
// the peer's address (its NAT) could draw replies and read the peer's
// recent packet sizes off their lengths.
func (c *Core) replyAllowed(addr netip.Addr, now time.Time) bool {
	if _, ok := c.known.Load(addr); ok {
		return true
	}
	return c.replies.add(now) <= cookieReplyCap
}

// underLoad counts initiations per second across shards. The router is
// under load past cookieThreshold of them, or once refusedThreshold this
// second cost a DH and were refused (an unknown key: a flood of spoofed
// initiations with a valid mac1 pays a DH for a handful, not for the
// first cookieThreshold; peers' handshakes and rekeys are never refused).
func (c *Core) underLoad(now time.Time) bool {
	return c.inits.add(now) > cookieThreshold || c.refusals.count(now) >= refusedThreshold
}

// refuse counts an initiation refused after its DH.
func (c *Core) refuse(now time.Time) {
	c.refusals.add(now)
	c.hs.refused.Add(1)
}

// handleInitiation answers an initiation, demands a cookie, or drops it
// (Ignored).
func (c *Core) handleInitiation(sh, conn int, data []byte, key crypto.HandshakeKey, from netip.AddrPort, local netip.Addr) shard.Verdict {
	if c.seenInits.Seen(data) {
		// A replay (a genuine initiator never repeats one): silence.
		c.hs.refused.Add(1)
		return shard.Ignored
	}
	now := c.now()
	if conn < 0 {
		conn = ConnGroup
	}
	// Who may cost us a DH. Nothing unproven is charged to a bucket that a
	// proven source depends on, so spoofers cannot lock a real peer out:
	//   - not under load (global rate under the threshold) and the source
	//     prefix's unproven bucket has a token: answer, charging it;
	//   - otherwise demand a cookie: a valid mac2 proves the initiator
	//     receives at its address, and it is charged to that address's
	//     proven bucket (an IPv6 address's /64), which spoofed initiations
	//     and the address's neighbours never touch;
	//   - no valid mac2: a cookie reply (never longer than the initiation),
	//     so a real peer whose prefix is being spoofed retries with mac2.
	loaded := c.underLoad(now)
	switch {
	case !loaded && c.limit.allow(from.Addr(), now):
	case c.cookies.CheckMac2(data, from, now):
		if !c.proven.allow(from.Addr(), now) {
			c.hs.rateLimited.Add(1)
			return shard.Ignored
		}
	default:
		if !c.replyAllowed(from.Addr(), now) {
			c.hs.cookiesCapped.Add(1)
			return shard.Ignored
		}
		reply, err := c.local.CookieReplyClassified(data, key, c.cookies, from, now, nil)
		if err != nil {
			c.hs.refused.Add(1)
			return shard.Ignored
		}
		_ = c.dp.SendHandshake(sh, conn, reply, from, local)
		c.hs.cookies.Add(1)
		return shard.Answered
	}
	inc, err := c.local.ConsumeInitiation(data)
	if err != nil {
		c.refuse(now)
		c.log.Debug("initiation refused", zap.Stringer("from", from), zap.Error(err))
		return shard.Ignored
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[inc.Peer().PublicKey()]
	if p == nil {
		c.refuse(now)
		return shard.Ignored
	}
	// Both sides initiating at once would each end up with the session of
	// its own initiation. The side with the smaller public key keeps its
	// initiation and ignores the other's; the larger one answers and
	// abandons its own.
	if p.init != nil && now.Sub(p.initAt) < HandshakeTimeout {
		ours := c.local.PublicKey()
		if bytes.Compare(ours[:], p.cfg.PublicKey[:]) < 0 {
			c.log.Debug("crossing initiations: keeping ours", zap.String("peer", p.cfg.PublicKey.String()))
			return shard.Answered
		}
		c.clearInit(p)
	}
	ports := make([]uint16, c.shards)
	for i := range ports {
		ports[i] = c.dp.ListenPort()
	}
	index := c.rnd.Uint32()
	resp, sess, err := inc.Respond(index, crypto.LaneOffer{Ports: ports})
	if err != nil {
		c.hs.refused.Add(1)
		return shard.Ignored
	}
	// Lanes first, then the response: the initiator sends data as soon
	// as it has the response. Our own initiation, however old, is
	// abandoned: a late response to it must not replace the session both
	// sides are about to agree on.
	c.clearInit(p)
	p.attempts = 0
	p.rtt = 0 // our lanes learn the initiator's (shard.LaneConfig.RTT)
	c.setEndpoint(p, from)
	// The initiation came from the initiator's socket of lane From: that
	// lane is at the source as seen (a NAT may have rewritten the port)
	// and arrives on this shard; the other lanes' ports are as offered.
	offered := slices.Clone(sess.Remote.Ports)
	k := sess.Remote.From
	if k < min(c.shards, sess.Remote.Lanes()) {
		sess.Remote.Ports[k] = from.Port()
	} else {
		// Sent from a lane this session will not run: handshakes go to
		// lane 0's address, which it does.
		k = -1
		c.setEndpoint(p, netip.AddrPortFrom(from.Addr(), offered[0]))
	}
	p.endpointLane = max(k, 0)
	logf := c.sessionLog(p)
	c.install(p, sess, offered, from.Addr(), netip.AddrPort{}, local, sh, k, now)
	if err := c.dp.SendHandshake(sh, conn, resp, from, local); err != nil {
		c.log.Warn("sending handshake response", zap.Stringer("to", from), zap.Error(err))
	}
	c.hs.answered.Add(1)
	logf("handshake answered", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("from", from), zap.Int("lanes", p.lanes))
	return shard.Answered
}

// handleResponse reads a response to one of our pending initiations. Anyone
// who saw the initiation and holds our public key can send one with a valid
// mac1 and index, so the reads are rate-limited per initiation and done
// outside the core lock (the Initiation serialises them and survives a
// failed one).
func (c *Core) handleResponse(idx uint32, data []byte, from netip.AddrPort) shard.Verdict {
	if c.npending.Load() == 0 {
		// Nothing of ours is pending: a response (anyone holding our
		// public key can make one) costs no core lock.
		return shard.NotHandshake
	}
	now := c.now()
	c.mu.Lock()
	p := c.pending[idx]
	if p == nil || p.init == nil || p.initIndex != idx {
		c.mu.Unlock()
		return shard.NotHandshake
	}
	in := p.init
	if !p.respReads.take(now, respRate, respBurst) {
		c.mu.Unlock()
		c.hs.rateLimited.Add(1)
		return shard.Ignored
	}
	c.mu.Unlock()
	sess, err := in.ConsumeResponse(data)
	if err != nil {
		c.hs.refused.Add(1)
		c.log.Debug("response refused", zap.Stringer("from", from), zap.Error(err))
		return shard.Ignored
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.init != in {
		return shard.Ignored // replaced or abandoned while we read it
	}
	p.rtt = now.Sub(p.initSent)
	if p.rtt > rttMax {
		p.rtt = 0 // a late response: no measure of the path
	}
	var proven netip.AddrPort
	if from == p.initTo {
		proven = from // answered from where we asked
		c.setKnown(p, knownProven, from.Addr())
	}
	c.clearInit(p)
	p.attempts = 0
	c.setEndpoint(p, from)
	logf := c.sessionLog(p)
	c.install(p, sess, nil, from.Addr(), proven, netip.Addr{}, -1, -1, now)
	p.endpointLane = 0
	c.hs.completed.Add(1)
	logf("handshake completed", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("endpoint", from), zap.Int("lanes", p.lanes))
	return shard.Answered
}

// handleCookieReply tries data as a cookie reply to our pending
// initiations sent to from. Garbage floods come through here, so it costs
// O(1) and never takes the core lock: a length test, then only the
// initiations sent to that exact endpoint are tried.
func (c *Core) handleCookieReply(data []byte, from netip.AddrPort) bool {
	if !crypto.CookieReplyLen(len(data)) || c.npending.Load() == 0 {
		return false
	}
	var buf [4]*crypto.Initiation
	c.pendMu.Lock()
	cands := append(buf[:0], c.byEndpoint[from]...)
	c.pendMu.Unlock()
	now := c.now()
	for _, in := range cands {
		c.cookieScans.Add(1)
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
