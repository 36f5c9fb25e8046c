package shard

import (
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// Control frames: encrypted control symbols on a lane, never FEC-coded.
// Received ones come from ingress.go (keepalives, the peer's FEC loss
// reports, which set our encoder's R in auto mode); the router sends ours
// through Periodic and SendControl, and they leave through egress.go's
// socket batches.

// Control frame bodies: a type byte, then its payload.
const (
	ctlKeepalive  = 0 // no payload: keeps NAT state and proves liveness
	ctlLossReport = 1 // fec.LossReport of the sender's receive side
)

// control acts on an opened control frame. Opening it already proved the
// peer alive (ingress set lastRx), which is all a keepalive is for; only a
// loss report carries more. A frame with no type byte or a type this
// version does not know is ignored the same way.
func (s *Shard) control(ln *lane, body []byte) {
	if len(body) == 0 || body[0] != ctlLossReport {
		return
	}
	rep, err := fec.ParseLossReport(body[1:])
	if err != nil {
		s.count(DropBadHeader)
		return
	}
	if ln.adapt != nil {
		k, r := ln.adapt.Observe(rep)
		_ = ln.enc.SetRatio(k, r)
	}
}

// Periodic sends each owned lane's loss report to the peer (whose encoder
// adapts R to it) and, when keepalive > 0, a keepalive on lanes idle for
// that long. The router calls it through Do about once a second.
func (s *Shard) Periodic(keepalive map[PeerID]time.Duration) {
	var buf [1 + 16]byte
	for peer, pl := range s.peers {
		for i, ln := range pl.local {
			if ln == nil {
				continue
			}
			rep := ln.dec.TakeLossReport()
			if rep.Expected > 0 {
				buf[0] = ctlLossReport
				if b, err := rep.AppendBinary(buf[:1]); err == nil {
					s.SendControl(peer, i, b)
				}
			}
			// Passive keepalive (as WireGuard): we heard from the peer
			// since we last sent, and have been quiet for a while —
			// tell it we are alive, or its liveness check re-handshakes.
			passive := ln.lastRx.After(ln.lastTx) && s.now.Sub(ln.lastTx) >= passiveKeepalive
			if ka := keepalive[peer]; (ka > 0 && s.now.Sub(ln.lastTx) >= ka) || passive {
				buf[0] = ctlKeepalive
				s.SendControl(peer, i, buf[:1])
			}
		}
	}
	s.flushAll()
}

// controlAD separates control frames from data: a control symbol cannot be
// opened as data (and FEC never carries control).
var controlAD = [1]byte{byte(crypto.KindControl)}

// SendControl sends a control frame (type byte, then payload) on lane index
// of peer, which this shard must own. Call it on the shard's goroutine.
func (s *Shard) SendControl(peer PeerID, index int, body []byte) bool {
	pl := s.peers[peer]
	if pl == nil || index >= len(pl.local) || pl.local[index] == nil {
		return false
	}
	ln := pl.local[index]
	if !ln.confirmed && ln.prev != nil {
		ln = ln.prev
	}
	if len(body) > MaxInner {
		return false
	}
	p := s.pool.Get()
	if p == nil {
		s.count(DropPoolEmpty)
		return false
	}
	copy(p.Buf[headroom:], body)
	sym, err := ln.sealer.SealSymbol(p.Buf[crypto.HeaderLen:], controlAD[:], p.Buf[headroom:headroom+len(body)])
	if err != nil {
		s.count(DropSeal)
		s.release(p)
		return false
	}
	d := ln.txf.Frame(p.Buf, crypto.Header{Kind: crypto.KindControl}, len(sym))
	ln.lastTx = s.now
	s.count(ControlOut)
	s.queue(ln, p, len(d))
	return true
}
