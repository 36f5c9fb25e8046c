package shard

import (
	"math/rand/v2"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// Control frames: encrypted control symbols on a lane, never FEC-coded.
// Received ones come from ingress.go (keepalives, the peer's FEC loss
// reports, which set our encoder's R in auto mode); ours are sent by the
// lane's own timers (controlTimers, run with tick) and leave through
// egress.go's socket batches. No period is fixed: loss reports and both
// kinds of keepalive wait a fresh random time each round, so their timing
// tells an observer nothing.

// Control frame bodies: a type byte, then its payload.
const (
	ctlKeepalive  = 0 // no payload: keeps NAT state and proves liveness
	ctlLossReport = 1 // fec.LossReport of the sender's receive side
)

// Feature bits a lane offer announces (crypto.LaneOffer.Features): what
// this data plane reads beyond the oldest peers' wire.
const (
	// FeatureLossRuns: loss reports may carry their runs of lost symbols
	// (fec.LossReportLen bytes, not fec.LossReportLenV1), so the peer's
	// adapter sees bursts.
	FeatureLossRuns = 1 << 0

	// Features is every feature this version has.
	Features = FeatureLossRuns
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

// controlTimers sends what ln's timers call for: its loss report (which
// the peer's encoder adapts R to) about once a second, and a keepalive
// when the lane has been quiet for its persistent-keepalive wait, or when
// it heard from the peer since it last sent and has been quiet for the
// passive wait (as WireGuard: else the peer's liveness check would
// re-handshake on one-way traffic). tick calls it for every owned lane.
func (s *Shard) controlTimers(ln *lane) {
	var buf [1 + 16]byte
	if !s.now.Before(ln.reportDue) {
		ln.reportDue = s.now.Add(jitter(lossReportEvery))
		if rep := ln.dec.TakeLossReport(); rep.Expected > 0 {
			buf[0] = ctlLossReport
			if b, err := rep.AppendBinary(buf[:1]); err == nil {
				if ln.cfg.PeerFeatures&FeatureLossRuns == 0 {
					b = b[:1+fec.LossReportLenV1] // a peer that reads no runs
				}
				s.sendControl(ln, b)
			}
		}
	}
	s.checkSilence(ln)
	s.followPending(ln)
	if ln.movePending {
		s.reportMove(ln)
	}
	quiet := s.now.Sub(ln.lastTx)
	persistent := ln.cfg.Keepalive > 0 && quiet >= ln.kaWait
	passive := ln.heard().After(ln.lastTx) && quiet >= ln.passiveWait
	if persistent || passive {
		buf[0] = ctlKeepalive
		s.sendControl(ln, buf[:1])
	}
}

// checkSilence reports (Config.Silent) a lane that kept sending for
// noReplyAfter after it last heard from the peer (under either key set, or
// since its install): liveness is an event from the lane, so the router
// polls no shard for it.
func (s *Shard) checkSilence(ln *lane) {
	if s.cfg.Silent == nil {
		return
	}
	rx, tx := ln.heard(), ln.lastTx
	if rx.Before(ln.installed) {
		rx = ln.installed
	}
	if tx.Sub(rx) <= noReplyAfter || s.now.Sub(tx) >= noReplyAfter {
		return
	}
	if !ln.silentAt.IsZero() && s.now.Sub(ln.silentAt) < noReplyAfter {
		return
	}
	ln.silentAt = s.now
	s.cfg.Silent(s.id, ln.cfg.Peer)
}

// drawWaits draws ln's next keepalive waits (after it sent anything).
func (ln *lane) drawWaits() {
	ln.kaWait = jitter(ln.cfg.Keepalive)
	ln.passiveWait = jitter(passiveKeepalive)
}

// jitter returns d scaled by a uniform factor in [1-jitterFraction,
// 1+jitterFraction): no control frame keeps a fixed period.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*2-1)*jitterFraction*float64(d))
}

// SendKeepalive sends a keepalive on lane index of peer (owned here): an
// initiator does so on every lane as soon as a handshake completes, so the
// responder sees the new keys in use and switches to them (HoldTx) even
// when no data flows. Call it through Do.
func (s *Shard) SendKeepalive(peer PeerID, index int) bool {
	return s.SendControl(peer, index, []byte{ctlKeepalive})
}

// SetKeepalive changes the persistent keepalive of peer's lanes on this
// shard (a reload changed PersistentKeepalive). Call it through Do.
func (s *Shard) SetKeepalive(peer PeerID, d time.Duration) {
	if pl := s.peers[peer]; pl != nil {
		for _, ln := range pl.local {
			if ln != nil {
				ln.cfg.Keepalive = d
				ln.drawWaits()
			}
		}
	}
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
	return s.sendControl(pl.local[index], body)
}

func (s *Shard) sendControl(top *lane, body []byte) bool {
	ln := top.sendKeys()
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
	// Timing lives on the lane, whichever keys sealed: a rekey responder
	// sending under the previous keys must not look silent to its own
	// keepalive timer (that sent one every tick).
	top.lastTx = s.now
	top.drawWaits()
	s.count(ControlOut)
	s.queue(ln, p, len(d))
	return true
}
