package control

// The peer set: SetPeers applies a configuration's peers (at start and on
// SIGHUP) and the route table built from their AllowedIPs; Peers and Counts
// are what `show` and the metrics read.

import (
	"fmt"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard"
)

// SetPeers installs the configured peers and the route table built from
// their AllowedIPs. Peers whose key and PSK are unchanged keep their
// sessions; a changed PSK drops the session; a changed Endpoint moves the
// handshakes and the lanes that talk to it; a removed peer loses its
// lanes and waiting packets.
func (c *Core) SetPeers(pcs []config.Peer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := map[crypto.PublicKey]bool{}
	var routes []shard.Route
	var fresh []crypto.PublicKey
	for _, pc := range pcs {
		if c.peers[pc.PublicKey] == nil {
			fresh = append(fresh, pc.PublicKey)
		}
	}
	c.local.Prepare(fresh)
	for _, pc := range pcs {
		keep[pc.PublicKey] = true
		p := c.peers[pc.PublicKey]
		if p == nil || p.cfg.PresharedKey != pc.PresharedKey || p.cfg.LegacyMAC != pc.LegacyMAC {
			cp, err := c.local.AddPeerLegacy(pc.PublicKey, pc.PresharedKey, pc.LegacyMAC)
			if err != nil {
				return fmt.Errorf("peer at line %d: %w", pc.Line, err)
			}
			if p != nil {
				if p.cfg.PresharedKey != pc.PresharedKey {
					c.dropSession(p)
				}
			} else {
				p = &peer{id: c.nextID}
				c.nextID++
				c.peers[pc.PublicKey] = p
				c.byID[p.id] = p
			}
			p.cp = cp
			if p.lens == nil {
				p.lens, p.bursts = new(shard.WireLens), new(fec.PathBursts)
			}
			cp.SetWireLengths(p.lens)
		}
		was, wasName, wasKA := p.cfg.Endpoint, p.cfg.EndpointName, p.cfg.PersistentKeepalive
		p.cfg = pc
		if !pc.EndpointName.IsZero() && pc.EndpointName == wasName && !pc.Endpoint.IsValid() {
			p.cfg.Endpoint = was // the reload's lookup failed: keep the last one
		}
		c.setKnown(p, knownConfigured, p.cfg.Endpoint.Addr())
		if pc.PersistentKeepalive != wasKA && p.sess != nil {
			c.dp.SetKeepalive(p.id, pc.PersistentKeepalive)
		}
		switch {
		case pc.Endpoint.IsValid() && !p.endpoint.IsValid():
			c.setEndpoint(p, pc.Endpoint)
		case !pc.EndpointName.IsZero() && pc.EndpointName == wasName:
			// The same name, looked up again by the reload: what it
			// resolves to now moves the peer as the resolver's lookups
			// do (a working session stays where it works).
			c.resolved(p, pc.Endpoint)
		case pc.Endpoint.IsValid() && was.IsValid() && pc.Endpoint != was && pc.Endpoint != p.endpoint:
			// The operator moved the peer: handshakes go there, and so
			// do the lanes that talk to its endpoint (as initiator, all
			// of them); the peer's lanes follow our datagrams' new
			// source on their side (roaming).
			c.log.Info("peer endpoint changed", zap.String("peer", pc.PublicKey.String()), zap.Stringer("from", p.endpoint), zap.Stringer("to", pc.Endpoint))
			c.moveEndpoint(p, pc.Endpoint)
		}
		for _, pfx := range pc.AllowedIPs {
			routes = append(routes, shard.Route{Prefix: pfx, Peer: p.id})
		}
	}
	for k, p := range c.peers {
		if !keep[k] {
			// Lanes or not, shards may hold packets waiting for it.
			c.clearInit(p)
			c.dp.RemovePeer(p.id)
			c.local.RemovePeer(k)
			c.setEndpoint(p, netip.AddrPort{})
			for slot := range p.known {
				c.setKnown(p, slot, netip.Addr{})
			}
			delete(c.peers, k)
			delete(c.byID, p.id)
		}
	}
	c.dp.SetRoutes(shard.NewTable(routes))
	return nil
}

// moveEndpoint sends p's handshakes to to, and moves the lanes that talk
// to its old endpoint there (as initiator, all of them); the peer's lanes
// follow our datagrams' new source on their side (roaming). Caller holds
// mu.
func (c *Core) moveEndpoint(p *peer, to netip.AddrPort) {
	from := p.endpoint
	c.setEndpoint(p, to)
	c.dp.MoveRemote(p.id, from, to)
}

// HandshakesUnanswered reports whether our handshakes with the peer whose
// key is k go unanswered (an initiation was retried for want of a
// response): its Endpoint name may point somewhere else by now.
func (c *Core) HandshakesUnanswered(k crypto.PublicKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[k]
	return p != nil && p.unanswered()
}

// unanswered: an initiation to p was retried for want of a response (the
// first attempt counts 1). Caller holds mu.
func (p *peer) unanswered() bool { return p.attempts >= 2 }

// SetResolvedEndpoint tells the core what name, the Endpoint host name of
// the peer with key k, resolves to now (ep). A peer without an address
// gets it; a peer whose handshakes go unanswered, or that has no session,
// moves there and tries it at the next tick. A working session keeps its
// address: the peer may have roamed, and a name can lag behind. Returns
// whether the peer's endpoint changed. A peer that is gone, or whose
// Endpoint is no longer that name (a reload changed it while the lookup
// ran), is left alone.
func (c *Core) SetResolvedEndpoint(k crypto.PublicKey, name config.HostPort, ep netip.AddrPort) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[k]
	if p == nil || !ep.IsValid() || name.IsZero() || p.cfg.EndpointName != name {
		return false
	}
	return c.resolved(p, ep)
}

// resolved applies what p's Endpoint name resolves to now (ep; zero: it
// did not resolve, which changes nothing): SetResolvedEndpoint's rule, for
// the resolver's lookups and a reload's. Caller holds mu.
func (c *Core) resolved(p *peer, ep netip.AddrPort) bool {
	if !ep.IsValid() {
		return false
	}
	p.cfg.Endpoint = ep
	c.setKnown(p, knownConfigured, ep.Addr())
	switch {
	case ep == p.endpoint:
		return false
	case !p.endpoint.IsValid():
		c.log.Info("peer endpoint resolved", zap.String("peer", p.cfg.PublicKey.String()),
			zap.Stringer("name", p.cfg.EndpointName), zap.Stringer("to", ep))
		c.setEndpoint(p, ep)
	case p.sess == nil || p.unanswered():
		c.log.Info("peer endpoint name resolves to a new address", zap.String("peer", p.cfg.PublicKey.String()),
			zap.Stringer("name", p.cfg.EndpointName), zap.Stringer("from", p.endpoint), zap.Stringer("to", ep))
		c.moveEndpoint(p, ep)
	default:
		return false
	}
	// The new address gets a first attempt now, not the old one's
	// backoff (a cookie for the old address is no use there either).
	p.attempts, p.nextTry = 0, time.Time{}
	return true
}

// dropSession forgets p's session and lanes. Caller holds mu.
func (c *Core) dropSession(p *peer) {
	if p.sess == nil {
		return
	}
	p.sess = nil
	p.place = nil
	p.gen++
	c.dp.RemovePeer(p.id)
}

// PeerInfo is one peer as the core sees it.
type PeerInfo struct {
	ID            shard.PeerID
	Config        config.Peer
	Endpoint      netip.AddrPort // zero: none known
	LastHandshake time.Time
	Handshakes    uint64
	Initiator     bool // of the current session
	Session       bool
}

// Peers lists the peers, in no order: O(peers) under the lock, so `show`
// and scrapes do not hold up handshakes for long.
func (c *Core) Peers() []PeerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PeerInfo, 0, len(c.peers))
	for _, p := range c.peers {
		out = append(out, PeerInfo{ID: p.id, Config: p.cfg, Endpoint: p.endpoint, LastHandshake: p.lastHS,
			Handshakes: p.nHS, Initiator: p.initiator, Session: p.sess != nil})
	}
	return out
}

// Counts are the handshake figures; they only go up.
type Counts struct {
	Initiated      uint64 `json:"initiated"`
	Completed      uint64 `json:"completed"`
	Answered       uint64 `json:"answered"`
	CookieDemanded uint64 `json:"cookie_demanded"`
	Refused        uint64 `json:"refused"`
	RateLimited    uint64 `json:"rate_limited"`
	// CookieCapped: initiations from no peer's known address left without
	// a cookie reply, over the per-second cap on such replies.
	CookieCapped uint64 `json:"cookie_capped"`
}

// Counts reads the handshake figures.
func (c *Core) Counts() Counts {
	return Counts{
		Initiated: c.hs.initiated.Load(), Completed: c.hs.completed.Load(), Answered: c.hs.answered.Load(),
		CookieDemanded: c.hs.cookies.Load(), Refused: c.hs.refused.Load(),
		RateLimited: c.hs.rateLimited.Load(), CookieCapped: c.hs.cookiesCapped.Load(),
	}
}
