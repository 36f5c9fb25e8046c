package shard

import (
	"encoding/binary"
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

// Control frame bodies: a type byte, then its payload, then (on keepalives,
// and on loss reports to a peer with FeaturePadding) padding up to a
// length drawn from the lane's recent data packets, so a length-only
// classifier cannot tell control frames from data. Readers take the
// payload's prefix and ignore the rest.
//
//	keepalive:   0 ‖ features (1) ‖ round trip in ms (2, big endian; 0: unknown)
//	loss report: 1 ‖ fec.LossReport (LossReportLen bytes, or
//	             LossReportLenV1 to a peer without FeatureLossRuns)
//	             [‖ delay echo (delayEchoLen bytes, delay.go) to a peer
//	             announcing EchoFeatures [‖ loss split (splitLen bytes,
//	             split.go) to one announcing FeatureLossSplit too; an
//	             empty report with them is a stamp, which a busy lane
//	             sends between its reports]]
//
// Readers before the features byte ignored all of a keepalive after its
// type, so the features and round trip reach new peers without bothering
// old ones. Every keepalive carries them ("hello"); the initiator sends one
// on every lane when the handshake completes, the responder when the peer
// confirms the keys (helloDue), and each side repeats its hello, about a
// second apart, until a keepalive of the peer's says heardYou, at most
// maxHellos times (an older peer never says it). A hello that arrives
// without heardYou, or the first one a lane hears, is answered at once.
const (
	ctlKeepalive  = 0
	ctlLossReport = 1

	keepaliveLen = 4 // type, features, round trip

	// heardYou, in a keepalive's features byte: the sender has the
	// receiver's features (it is not a feature).
	heardYou = 1 << 7
	// maxHellos bounds the unacknowledged hellos a lane sends per
	// session: an older peer never acknowledges.
	maxHellos = 4
)

// Feature bits the keepalives announce: what this data plane reads beyond
// the oldest peers' wire.
const (
	// FeatureLossRuns: loss reports may carry their runs of lost symbols
	// (fec.LossReportLen bytes, not fec.LossReportLenV1), so the peer's
	// adapter sees bursts.
	FeatureLossRuns = 1 << 0
	// FeaturePadding: loss reports may carry padding after their
	// LossReportLen bytes.
	FeaturePadding = 1 << 1
	// FeatureFramePad: padded datagrams (crypto.Header.Pad) are read.
	FeatureFramePad = 1 << 2
	// FeatureLongHandshakes: handshake datagrams longer than older
	// routers take are read (crypto.LongHandshakes), so initiations may
	// take any length data takes.
	FeatureLongHandshakes = 1 << 3
	// FeatureDelayEcho: loss reports may carry the delay echo after
	// their LossReportLen bytes (delay.go), which gives the peer its
	// round trip all along. The echo goes only to a peer that also
	// announces FeatureLossRuns and FeaturePadding (EchoFeatures).
	FeatureDelayEcho = 1 << 4
	// FeatureLongGroups: FEC groups beyond fec.LegacyMaxK:LegacyMaxR
	// are decoded, so the adapter may weigh groups of up to fec.MaxK
	// (lane.applyFEC).
	FeatureLongGroups = 1 << 5
	// FeatureLossSplit: loss reports and stamps may carry the loss split
	// after the delay echo (split.go), and a busy lane stamps between
	// its reports (delayjudge.go). Both go only to a peer that also
	// announces EchoFeatures; a router that reads the echo alone takes
	// the split for padding, but its rule for the round trip wants a
	// sample about a second apart, not ten a second.
	FeatureLossSplit = 1 << 6

	// Features is every feature this version has.
	Features = FeatureLossRuns | FeaturePadding | FeatureFramePad | FeatureLongHandshakes | FeatureDelayEcho | FeatureLongGroups | FeatureLossSplit
)

// control acts on an opened control frame. Opening it already proved the
// peer alive (ingress set lastRx), which is all an old peer's keepalive is
// for; a new peer's also says what it reads and the round trip it knows.
// A frame with no type byte or a type this version does not know is
// ignored the same way.
func (s *Shard) control(ln *lane, body []byte) {
	if len(body) == 0 {
		return
	}
	switch body[0] {
	case ctlKeepalive:
		if len(body) < keepaliveLen {
			ln.setPeerFeatures(0) // an older router (perhaps restarted as one)
			return
		}
		first := !ln.heardPeer
		ln.heardPeer = true
		ln.setPeerFeatures(body[1] &^ heardYou)
		if body[1]&heardYou != 0 {
			ln.acked = true
		}
		if body[1]&heardYou == 0 || first {
			// It lacks ours, or does not know we have its: answer.
			ln.helloDue = true
		}
		rtt := time.Duration(binary.BigEndian.Uint16(body[2:])) * time.Millisecond
		if rtt > 0 && ln.cfg.HoldTx {
			// A responder has no handshake round trip of its own: the
			// initiator's serves the adapter. Only a new one is a new
			// handshake's (every keepalive repeats it, also after a
			// roam, when it measured the old path).
			if rtt != ln.rtt {
				ln.delay.noteHandshake(rtt, s.now)
			}
			ln.setRTT(rtt)
		}
		return
	case ctlLossReport:
		s.lossReport(ln, body[1:])
	}
}

// controlTimers sends what ln's timers call for: its loss report (which
// the peer's encoder adapts R to) about once a second (its first few
// sooner), and a keepalive
// when the lane has been quiet for its persistent-keepalive wait, or when
// the peer sent something that asks for an answer (data, or a control
// frame other than a keepalive) since the lane last sent and it has been
// quiet for the passive wait (as WireGuard: else the peer's liveness check would
// re-handshake on one-way traffic). tick calls it for every owned lane.
func (s *Shard) controlTimers(ln *lane) {
	if ln.held.Expected > 0 && !s.now.Before(ln.heldUntil) {
		s.observeHeld(ln)
	}
	echo, reported := ln.echoes(), false
	due := !s.now.Before(ln.reportDue)
	if !due && ln.sizingReports < earlyReports && ln.counted() >= sizingExpected &&
		(ln.sizingReports == 0 || s.now.Sub(ln.reportedAt) >= max(earlyReportGap, ln.delay.judgeLag())) {
		// A lane's first reports that can size the peer's FEC go as
		// soon as they can (timing.go, earlyReports).
		due = true
	}
	if due {
		ln.reportDue = s.now.Add(jitter(lossReportEvery))
		rep := ln.takeLossReport()
		if rep.Expected == 0 {
			// Nothing to report: the split's slices would go stale
			// until a report carried them (a lane that only sends).
			ln.split.take()
		}
		if rep.Expected > 0 || echo && ln.delay.stampDue {
			if rep.Expected > 0 {
				ln.reportsSent++
			}
			if rep.Expected >= sizingExpected {
				// Only a report the peer's adapter can size its FEC by
				// uses up the early ones: a lane that carried a ping or
				// two before its first flow still reports that flow's
				// loss as soon as it counted enough of it.
				ln.sizingReports++
				ln.reportedAt = s.now
			}
			reported = s.sendReport(ln, rep, echo)
		}
	}
	if dt := s.now.Sub(ln.tickAt); dt > 0 && !ln.tickAt.IsZero() {
		ln.tickRate = float64(ln.txPackets-ln.tickTx) / dt.Seconds()
		// A lane a flow has left, or one of pings: its small packets'
		// groups carry one parity per packet while its ticks are quiet.
		if ln.adapt != nil {
			if ln.adapt.SetTickFill(ln.tickRate*ln.sendKeys().enc.FlushTimeout().Seconds(), ln.largeThisTick() > 0) {
				ln.applyFEC()
			}
			switch {
			case !ln.adapt.Quiet():
				ln.quietAt = time.Time{}
			case ln.quietAt.IsZero():
				ln.quietAt = s.now
			}
		}
	}
	ln.tickTx, ln.tickLarge, ln.tickAt = ln.txPackets, ln.txLarge, s.now // sendData counts a flow's packets from here
	if ln.splits() && !s.now.Before(ln.stampAt) {
		// A busy lane's stamps between reports (delayjudge.go).
		pk := ln.txPackets + ln.rxPackets
		busy := pk-ln.stampPkts >= busyPackets
		ln.stampAt, ln.stampPkts = s.now.Add(jitter(stampEvery)), pk
		if busy && !reported {
			s.sendReport(ln, fec.LossReport{}, true)
		}
	}
	s.checkSilence(ln)
	s.followPending(ln)
	if ln.movePending {
		s.reportMove(ln)
	}
	quiet := s.now.Sub(ln.lastTx)
	persistent := ln.cfg.Keepalive > 0 && quiet >= ln.kaWait
	passive := ln.lastAsk.After(ln.lastTx) && quiet >= ln.passiveWait
	hello := ln.helloDue || ln.helloRepeating() && !s.now.Before(ln.helloAt)
	if persistent || passive || hello {
		var buf [keepaliveLen]byte
		if s.sendKeepalive(ln, buf[:0], hello) {
			ln.helloDue = false
		}
	}
}

// checkSilence reports (Config.Silent) a lane that asked for an answer
// (sent data, or a control frame other than a keepalive) noReplyAfter ago
// and heard nothing since: the wait runs from its first such send after it
// last heard from the peer under any keys or got its current keys
// (askSince, heardAt), as WireGuard's runs from its first unanswered data,
// whether the lane went on sending or not. A lane that resumes after an
// idle spell starts a new wait; one whose last packet went to a peer that
// restarted reports it. Liveness is an event from the lane, so the control
// core polls no shard for it. It says whether the peer's datagrams were
// framed by the previous wire version (noteOldFraming).
func (s *Shard) checkSilence(ln *lane) {
	if s.cfg.Silent == nil || !ln.askSince.After(ln.heardAt()) || s.now.Sub(ln.askSince) <= noReplyAfter {
		return
	}
	if !ln.silentAt.IsZero() && s.now.Sub(ln.silentAt) < noReplyAfter {
		return
	}
	ln.silentAt = s.now
	s.cfg.Silent(s.id, ln.cfg.Peer, ln.cur.oldFraming)
}

// asked notes a send that asks for an answer at now; the first since the
// peer was last heard starts the wait checkSilence measures.
func (ln *lane) asked(now time.Time) {
	if !ln.askSince.After(ln.heardAt()) {
		ln.askSince = now
	}
}

// heardAt is when ln last heard from its peer under any keys, or got its
// current keys (a completed handshake), if later.
func (ln *lane) heardAt() time.Time {
	if ln.lastRx.Before(ln.cur.installed) {
		return ln.cur.installed
	}
	return ln.lastRx
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
	ln := s.ownedLane(peer, index)
	if ln == nil {
		return false
	}
	var buf [keepaliveLen]byte
	return s.sendKeepalive(ln, buf[:0], true)
}

// helloRepeating reports whether ln repeats its hello: sent, not yet
// acknowledged by the peer, fewer than maxHellos times.
func (ln *lane) helloRepeating() bool { return !ln.acked && ln.hellos > 0 && ln.hellos < maxHellos }

// sendKeepalive sends ln's keepalive, building it in buf. A hello (sent at
// a handshake, or answering the peer's) is repeated until the peer
// acknowledges it; other keepalives carry the same bytes but start no
// repeats.
func (s *Shard) sendKeepalive(ln *lane, buf []byte, hello bool) bool {
	if !s.sendControl(ln, ln.keepalive(buf)) {
		return false
	}
	if hello && !ln.acked {
		ln.hellos++
		ln.helloAt = s.now.Add(jitter(helloEvery))
	}
	return true
}

// SetKeepalive changes the persistent keepalive of peer's lanes on this
// shard (a reload changed PersistentKeepalive). Call it through Do.
func (s *Shard) SetKeepalive(peer PeerID, d time.Duration) {
	if pl := s.table.peer(peer); pl != nil {
		for _, ln := range pl.local {
			if ln != nil {
				ln.cfg.Keepalive = d
				ln.drawWaits()
				s.table.stir(ln)
			}
		}
	}
}

// controlAD separates control frames from data: a control symbol cannot be
// opened as data (and FEC never carries control).
var controlAD = [1]byte{byte(crypto.KindControl)}

// ownedLane is lane index of peer if this shard owns it, else nil.
func (s *Shard) ownedLane(peer PeerID, index int) *lane { return s.table.local(peer, index) }

func (s *Shard) sendControl(ln *lane, body []byte) bool {
	ks := ln.sendKeys()
	if len(body) > MaxInner {
		return false
	}
	p := s.pool.Get()
	if p == nil {
		s.count(DropPoolEmpty)
		return false
	}
	n := copy(p.Buf[headroom:], body)
	framePad := s.cfg.Padding.Mode != PadOff && ln.heardPeer && ln.padded()
	if body[0] == ctlKeepalive || ln.peerFeatures&FeaturePadding != 0 {
		// Every reader ignores what follows a keepalive's payload.
		want := ln.padLen()
		if m := s.cfg.Padding.maxInner(); m > 0 {
			// The peer's lengths (those it sent us) may be longer
			// than our own MTU lets out.
			want = min(want, m)
		}
		if s.cfg.Padding.Mode != PadOff && !framePad {
			// The peer has not said in this session that it reads
			// padded datagrams (a hello; lane.padded): the pad goes
			// into the plaintext instead, so the datagram is as long
			// as a padded one.
			want = max(want, n)
			want += s.cfg.Padding.pad(uint32(s.padRand.Uint64()), want+crypto.DataOverhead)
		}
		// Whatever the sample holds, the frame fits the buffer.
		if want = min(want, MaxInner); want > n {
			clear(p.Buf[headroom+n : headroom+want])
			n = want
		}
	}
	sym, err := ks.sealer.SealSymbol(p.Buf[crypto.HeaderLen:], controlAD[:], p.Buf[headroom:headroom+n])
	if err != nil {
		s.count(DropSeal)
		s.release(p)
		return false
	}
	h := crypto.Header{Kind: crypto.KindControl}
	if framePad {
		end := crypto.HeaderLen + len(sym)
		h.Pad = s.padFrame(p.Buf, end, end+crypto.TagLen, 0)
	}
	d := ks.txf.Frame(p.Buf, h, len(sym))
	// Timing lives on the lane, whichever keys sealed: a rekey responder
	// sending under the previous keys must not look silent to its own
	// keepalive timer (that sent one every tick).
	ln.lastTx = s.now
	if body[0] != ctlKeepalive {
		ln.asked(s.now)
	}
	ln.drawWaits()
	s.table.stir(ln)
	s.count(ControlOut)
	s.queue(ln, p, len(d))
	return true
}

// keepalive appends ln's keepalive body to b: features (and heardYou
// once the peer's arrived), and the round trip in whole milliseconds,
// rounded up (0 only when unknown).
func (ln *lane) keepalive(b []byte) []byte {
	f := byte(Features)
	if ln.heardPeer {
		f |= heardYou
	}
	ms := min((ln.rtt+time.Millisecond-1)/time.Millisecond, 0xffff)
	return binary.BigEndian.AppendUint16(append(b, ctlKeepalive, f), uint16(ms))
}

// takeLossReport is what ln's decoders counted since the last report,
// under its current keys and its previous ones: the peer sends under the
// previous keys while our response to its rekey has not reached it, and
// a report of the current keys alone said nothing of a whole run's data
// (the peer's adapter stayed at its start-up guess).
func (ln *lane) takeLossReport() fec.LossReport {
	rep := ln.cur.dec.TakeLossReport()
	if ln.prev != nil {
		rep = rep.Add(ln.prev.dec.TakeLossReport())
	}
	return rep
}

// counted is how many symbols ln's decoders counted toward its next loss
// report (takeLossReport).
func (ln *lane) counted() uint32 {
	n := ln.cur.dec.Counted()
	if ln.prev != nil {
		n += ln.prev.dec.Counted()
	}
	return n
}
