// The checks that need the whole file: checkText, the last part of the
// parse step, and finish, the last step, which checks the peers' public
// keys once the private key is known and returns the Config or the errors.

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/yip-router/yip-router/crypto"
)

// checkText runs the checks that need the whole text but no I/O.
func (p *parser) checkText() {
	ic := &p.iface
	if p.ifaceLine == 0 {
		p.errorf(1, secInterface, "", "section is missing (exactly one is required)")
	} else {
		_, k1 := p.ifaceSeen["PrivateKey"]
		_, k2 := p.ifaceSeen["PrivateKeyFile"]
		if !k1 && !k2 {
			p.errorf(p.ifaceLine, secInterface, "PrivateKey", "missing (set PrivateKey or PrivateKeyFile)")
		}
		if l, ok := p.ifaceSeen["MTU"]; ok && ic.MTU < minIPv6MTU {
			for i, a := range ic.Addresses {
				if a.Addr().Is6() {
					p.errorf(l, secInterface, "MTU", "%d is below %d, the IPv6 minimum, and Address %s (line %d) is IPv6",
						ic.MTU, minIPv6MTU, a, p.addrLines[i])
					break
				}
			}
		} else if l, ok := p.ifaceSeen["Padding"]; ok && ic.TunMTU() < minIPv6MTU {
			for i, a := range ic.Addresses {
				if a.Addr().Is6() {
					p.errorf(l, secInterface, "Padding", "%s takes %d bytes from MTU %d, leaving %d, below %d, the IPv6 minimum, and Address %s (line %d) is IPv6 (raise MTU)",
						ic.Padding, crypto.PadHeadroom, ic.MTU, ic.TunMTU(), minIPv6MTU, a, p.addrLines[i])
					break
				}
			}
		}
		if l, ok := p.ifaceSeen["Padding"]; ok && ic.TunMTU() < minMTU {
			p.errorf(l, secInterface, "Padding", "%s takes %d bytes from MTU %d, leaving %d, below %d (raise MTU)",
				ic.Padding, crypto.PadHeadroom, ic.MTU, ic.TunMTU(), minMTU)
		}
		if _, err := ic.PreUpName(); err != nil {
			i := slices.IndexFunc(ic.Hooks.PreUp, func(c string) bool { return strings.Contains(c, "%i") })
			p.errorf(p.preUpLines[i], secInterface, "PreUp", "%v (Name at line %d)", err, p.ifaceSeen["Name"])
		}
	}
	family := p.listenFamily()
	for _, ps := range p.peers {
		if _, ok := ps.seen["PublicKey"]; !ok {
			p.errorf(ps.Line, secPeer, "PublicKey", "missing (every [Peer] needs one)")
		}
		if l, ok := ps.seen["LegacyMAC"]; ok && ps.LegacyMAC && ps.PresharedKey.IsZero() {
			p.errorf(l, secPeer, "LegacyMAC", "on without a PresharedKey: it only concerns peers with one")
		}
		// An Endpoint host name is checked by the resolve step.
		if ep := ps.Endpoint; ep.IsValid() && !fitsFamily(ep.Addr(), family) {
			p.errorf(ps.seen["Endpoint"], secPeer, "Endpoint", "%s is not %s like ListenAddress %s (line %d)",
				ep, family, p.iface.ListenAddress.Unmap(), p.ifaceSeen["ListenAddress"])
		}
	}
	p.overlaps()
	p.handshakeKeys()
}

// handshakeKeys bounds the keys a handshake's mac1 is checked under: one
// per distinct PresharedKey of peers without LegacyMAC, plus the
// public-key-only form when a peer has no PresharedKey or has LegacyMAC.
// Every datagram of handshake length that matches no lane costs a keyed
// BLAKE2s per key.
func (p *parser) handshakeKeys() {
	keys := map[crypto.PresharedKey]bool{}
	for _, ps := range p.peers {
		k := ps.PresharedKey
		if ps.LegacyMAC {
			k = crypto.PresharedKey{}
		}
		if keys[k] {
			continue
		}
		keys[k] = true
		if len(keys) > crypto.MaxHandshakeKeys {
			key, l := "PresharedKey", ps.seen["PresharedKey"]
			if k.IsZero() {
				key, l = "", ps.Line
				if ps.LegacyMAC {
					key, l = "LegacyMAC", ps.seen["LegacyMAC"]
				}
			}
			p.errorf(l, secPeer, key, "more than %d handshake keys (distinct PresharedKeys, plus one for all peers without one or with LegacyMAC = on): every stray handshake-length datagram is checked under each; give peers the same PresharedKey, or set LegacyMAC = on for some (at both ends)",
				crypto.MaxHandshakeKeys)
			return
		}
	}
}

// listenFamily is the one address family the ListenAddress's sockets
// carry (FamilyOf).
func (p *parser) listenFamily() string { return FamilyOf(p.iface.ListenAddress) }

// FamilyOf is the one address family underlay sockets bound to bind carry,
// "IPv4" or "IPv6", or "" for both. Bound to :: the sockets carry both
// families; to anything else (0.0.0.0 included) one.
func FamilyOf(bind netip.Addr) string {
	la := bind.Unmap()
	switch {
	case la == netip.IPv6Unspecified():
		return ""
	case la.Is4():
		return "IPv4"
	}
	return "IPv6"
}

// fitsFamily reports whether a is of family ("" fits any address).
func fitsFamily(a netip.Addr, family string) bool {
	return family == "" || a.Is4() == (family == "IPv4")
}

// finish checks the peers' public keys against this interface's own and one
// another's, then returns the config, or every problem found, sorted by
// line.
func (p *parser) finish() (*Config, error) {
	p.checkPeerKeys()
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		if p.dropped > 0 {
			p.errs = append(p.errs, &Error{File: p.name, Line: p.droppedLine,
				Msg: fmt.Sprintf("too many errors: %d more not shown", p.dropped)})
		}
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	slices.SortStableFunc(p.warns, func(a, b *Error) int { return a.Line - b.Line })
	c := &Config{Interface: p.iface, Warnings: p.warns}
	for _, ps := range p.peers {
		c.Peers = append(c.Peers, ps.Peer)
	}
	return c, nil
}

// checkPeerKeys reports a peer with this interface's own public key and
// peers that share one. It needs the private key, which a PrivateKeyFile
// gives only in the readKey step.
func (p *parser) checkPeerKeys() {
	var own crypto.PublicKey
	if p.privOK {
		own = p.iface.PrivateKey.Public()
	}
	byKey := map[crypto.PublicKey]int{}
	for _, ps := range p.peers {
		l, seen := ps.seen["PublicKey"]
		switch {
		case !seen, ps.PublicKey.IsZero():
			// missing or a bad value: already reported
		case p.privOK && ps.PublicKey == own:
			p.errorf(l, secPeer, "PublicKey", "is this interface's own public key (from %s at line %d)",
				p.privKeyName(), p.privLine())
		default:
			if first, dup := byKey[ps.PublicKey]; dup {
				p.errorf(l, secPeer, "PublicKey", "duplicate peer: same key as the peer at line %d (PublicKey at line %d)",
					p.peerAt(first), first)
			} else {
				byKey[ps.PublicKey] = l
			}
		}
	}
}

func (p *parser) privKeyName() string {
	if _, ok := p.ifaceSeen["PrivateKey"]; ok {
		return "PrivateKey"
	}
	return "PrivateKeyFile"
}

func (p *parser) privLine() int { return p.ifaceSeen[p.privKeyName()] }

// peerAt returns the header line of the peer whose PublicKey is on line l.
func (p *parser) peerAt(l int) int {
	for _, ps := range p.peers {
		if ps.seen["PublicKey"] == l {
			return ps.Line
		}
	}
	return 0
}

// overlaps reports AllowedIPs prefixes listed twice, within a peer or
// between peers: which peer owns the prefix would be ambiguous. Nested
// prefixes are fine, as in WireGuard: the longest prefix wins (a hub's
// 10.0.0.0/8 and a site's 10.1.0.0/16), for the routes out and for the
// source a peer's packets may have. After sorting by (family, address,
// length), equal prefixes are neighbours.
func (p *parser) overlaps() {
	type entry struct {
		pf   netip.Prefix
		line int
		peer int // header line
		seq  int // position in the file, to order entries on the same line
	}
	var all []entry
	for _, ps := range p.peers {
		for i, pf := range ps.AllowedIPs {
			all = append(all, entry{pf, ps.allowedLines[i], ps.Line, len(all)})
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := a.pf.Addr().Compare(b.pf.Addr()); c != 0 {
			return c // orders IPv4 before IPv6
		}
		if c := a.pf.Bits() - b.pf.Bits(); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for i := 1; i < len(all); i++ {
		first, second := all[i-1], all[i]
		if first.pf != second.pf {
			continue
		}
		whose := fmt.Sprintf("peer at line %d", first.peer)
		if first.peer == second.peer {
			whose = "same peer"
		}
		p.errorf(second.line, secPeer, "AllowedIPs", "%s is also listed at line %d (%s); a prefix belongs to one peer (nested prefixes are fine: the longest wins)",
			second.pf, first.line, whose)
	}
}
