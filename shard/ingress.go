package shard

import (
	"net/netip"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// Ingress: a datagram received on one of the shard's sockets
// (loop_linux.go), or handed over by the shard it arrived on (mesh.go),
// finds its lane by source address. Data and parity go through the lane's
// FEC decoder, which hands each data symbol (received or recovered) to
// deliverSymbol: opened, checked against the peer's AllowedIPs, then written
// to the TUN queue (or the coalescer, vnet_linux.go). Control symbols go to
// control.go. A datagram for a lane another shard owns is copied and handed
// over. One that matches no lane at its address is tried against the lanes
// this shard owns (roam.go: the peer moved); failing that it goes to the
// router (Config.Unmatched), which handles handshakes.

// ingress handles one datagram received on conn, data from from. data is
// the caller's: a datagram for a lane another shard owns is copied into a
// pool buffer to hand it over.
func (s *Shard) ingress(conn int, data []byte, from netip.AddrPort) {
	if len(data) > maxDatagram {
		// Refused before any lookup or tag work: a spoofed 64 KB
		// datagram (IP fragments) must cost no more than a short one.
		s.count(DropOversize)
		return
	}
	s.ingressVia(conn, s.id, data, from)
}

// maxDatagram is the longest datagram any router sends: every one, data,
// parity, control or handshake, is built in a packet buffer (BufSize).
// Anything longer is not a router's.
const maxDatagram = BufSize

// ingressVia is ingress for a datagram that arrived on shard via (another
// shard handed it over: conn is -1). A lane that proves to receive on
// another shard is reported misplaced (place.go).
func (s *Shard) ingressVia(conn, via int, data []byte, from netip.AddrPort) {
	ln := s.table.laneAt(from)
	if ln == nil {
		if f, ok := s.table.foreignAt(from); ok && f.owner != s.id && via == s.id {
			s.handIngress(f.owner, data, from)
			return
		}
	} else {
		keys, h, sym, err := s.deframe(ln, data)
		switch err {
		case nil:
			if via == s.id {
				s.receive(ln, keys, h, sym)
				return
			}
			before := s.authed
			s.receive(ln, keys, h, sym)
			if s.authed != before {
				s.misplaced(ln, via)
			}
			return
		case crypto.ErrTag, crypto.ErrShort:
			// Another lane's datagram from this address, or a handshake
			// (a re-handshake from the same address looks like this), or
			// a peer of the previous wire version.
			s.noteOldFraming(ln, data)
		default:
			s.count(DropBadHeader)
			return
		}
	}
	if s.roam(ln, via, data, from) || (via == s.id && s.tryCandidates(data, from)) {
		return
	}
	v := NotHandshake
	if s.cfg.Unmatched != nil {
		v = s.cfg.Unmatched(s.id, conn, data, from, s.localOf(via))
	}
	if v == Answered {
		return
	}
	s.junkBytes += uint64(crypto.Mac1Covered(len(data)))
	if v == Ignored {
		return // the handshake path counted it
	}
	if ln == nil {
		s.count(DropUnknownLane)
	} else {
		s.count(DropBadTag)
	}
}

// localOf is the local address the datagram in ingress was sent to, if it
// arrived on this shard's socket (via): one handed over from another
// shard does not carry it.
func (s *Shard) localOf(via int) netip.Addr {
	if via != s.id {
		return netip.Addr{}
	}
	return s.rxLocal
}

// noteOldFraming tries data, which came from ln's address and failed its
// tag, as wire version 1 framed it under the lane's keys, at most v1Checks
// times per keyset, and remembers a match for checkSilence to report.
func (s *Shard) noteOldFraming(ln *lane, data []byte) {
	ks := ln.cur
	if ks.oldFraming || ks.v1Tries >= v1Checks {
		return
	}
	ks.v1Tries++
	ks.oldFraming = ks.rxf.MatchesV1(data)
}

// deframe checks data's tag under ln's keys, then under its previous
// keys (during a rekey), and returns the keys that matched. On ErrTag and
// ErrShort data is untouched.
func (s *Shard) deframe(ln *lane, data []byte) (*keyset, crypto.Header, []byte, error) {
	h, sym, err := ln.cur.rxf.Deframe(data)
	if err == crypto.ErrTag && ln.prev != nil {
		if h2, sym2, err2 := ln.prev.rxf.Deframe(data); err2 != crypto.ErrTag {
			return ln.prev, h2, sym2, err2
		}
	} else if err == nil && !ln.cur.confirmed {
		ln.cur.confirmed = true // the peer has the new keys: send with them
		ln.helloDue = true      // and tell it what we read (control.go)
		if ln.cfg.Asked && s.cfg.Confirmed != nil {
			// Keys only our response gave: it reached the peer at
			// Remote, wherever this datagram came from.
			s.cfg.Confirmed(s.id, ln.cfg.Peer, ln.cfg.Index, ln.cfg.Remote)
		}
	}
	return ln.cur, h, sym, err
}

// receive handles a datagram whose tag verified under keys (ln's current
// or previous keys): data and parity to the keys' decoder, control
// symbols opened here.
func (s *Shard) receive(ln *lane, keys *keyset, h crypto.Header, sym []byte) {
	ln.rxDgrams++ // the loss split's count (split.go)
	switch h.Kind {
	case crypto.KindData, crypto.KindParity:
		// What the wire carried (data or parity), not what FEC
		// recovers: the lengths control frames take after (padLen).
		ln.noteSize(len(sym) - crypto.SymbolOverhead)
		s.table.stir(ln) // its groups expire, a confirmed key's hello is due
		keys.decDirty = true
		if h.Kind == crypto.KindParity {
			s.sawParity(ln)
		}
		keys.dec.Push(fec.Meta{Kind: fec.Kind(h.Kind), Group: h.Group, Index: h.Index, K: h.K, R: h.R}, sym, s.now, keys.deliver)
	case crypto.KindControl:
		body, err := keys.opener.OpenSymbol(controlAD[:], sym)
		if err == crypto.ErrReplay {
			s.count(DropReplay)
			break
		}
		if err != nil {
			s.count(DropDecrypt)
			break
		}
		ln.lastRx = s.now
		s.table.stir(ln)
		if len(body) > 0 && body[0] != ctlKeepalive {
			ln.lastAsk = s.now
		}
		s.authed++
		s.count(ControlIn)
		s.control(ln, body)
	}
}

// handIngress copies a datagram for a lane shard owner owns into a pool
// buffer and hands it over (a NAT rewrote the peer's lane port).
func (s *Shard) handIngress(owner int, data []byte, from netip.AddrPort) {
	p := s.pool.Get()
	if p == nil {
		s.count(DropPoolEmpty)
		return
	}
	if len(data) > len(p.Buf) {
		// Only a UDP GRO receive buffer holds more; no datagram of ours is
		// this large.
		s.pool.Put(p)
		s.count(DropOversize)
		return
	}
	s.count(ForeignLane)
	p.N, p.Addr, p.Meta = copy(p.Buf, data), from, meshIngress
	s.handoff[owner] = append(s.handoff[owner], p)
	if len(s.handoff[owner]) == cap(s.handoff[owner]) {
		s.flushHandoff(owner)
	}
}

// bindDeliver points ks's deliver at this shard's deliverSymbol for ks,
// keys of lane ln: at install, and when the lane moves here from another
// shard.
func (s *Shard) bindDeliver(ln *lane, ks *keyset) {
	ks.deliver = func(sym []byte, recovered bool) bool { return s.deliverSymbol(ln, ks, sym, recovered) }
}

// deliverSymbol opens a data symbol (as received, or recovered by FEC) and
// writes the packet to the TUN queue if its source belongs to the peer,
// a recovered TCP segment's timestamp raised where its host would drop
// it (timestamps.go).
// Each keyset's decoder calls it through the keyset's deliver (bindDeliver).
// It reports false when the symbol does not open: the tag does not cover
// a data symbol's payload, so one changed on the path arrives here, and
// the decoder then treats it as an erasure (fec.Deliver).
func (s *Shard) deliverSymbol(ln *lane, ks *keyset, sym []byte, recovered bool) bool {
	pt, err := ks.opener.OpenSymbol(nil, sym)
	switch err {
	case nil:
	case crypto.ErrReplay:
		s.count(DropReplay)
		return false
	default:
		s.count(DropDecrypt)
		return false
	}
	ln.lastRx = s.now // authenticated and not a replay: the peer is alive
	ln.lastAsk = s.now
	s.authed++
	if s.cfg.Table.Load().LookupPacket(pt, true) != ln.cfg.Peer {
		s.count(DropNotAllowed)
		return true
	}
	if ln.tsOn {
		s.timestamps(ln, pt, recovered)
	}
	if s.vnet != nil {
		// Copied into the coalescer; written (and counted) by flushTun.
		s.coalesce(pt)
		ln.rxPackets++
		ln.rxBytes += uint64(len(pt))
		return true
	}
	if err := s.tunOut(pt); err != nil {
		s.count(DropTunWrite)
		return true
	}
	ln.rxPackets++
	ln.rxBytes += uint64(len(pt))
	s.count(TunOut)
	return true
}

func (s *Shard) writeTun(pkt []byte) error { return s.cfg.TUN.Write(pkt) }
