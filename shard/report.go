package shard

import (
	"time"

	"github.com/yip-router/yip-router/fec"
)

// Loss reports: the peer's, heard by the lane's FEC adapter (judged by the
// round-trip samples, delayjudge.go, and split by the queue the peer saw,
// split.go), and ours, which controlTimers sends (control.go has the
// frame format).

// lossReport acts on a loss report of the peer's (body, after the type
// byte): the delay echo and split it carries, then the adapter hears it
// at once, or once the round-trip samples that judge its losses have
// arrived.
func (s *Shard) lossReport(ln *lane, body []byte) {
	b := body
	if len(b) > fec.LossReportLen {
		b = b[:fec.LossReportLen] // padded (FeaturePadding), or a delay echo
	}
	rep, err := fec.ParseLossReport(b)
	if err != nil {
		s.count(DropBadHeader)
		return
	}
	echo := ln.echoes()
	var split splitCounts
	splitOK := false
	if echo && len(b) == fec.LossReportLen {
		split, splitOK = s.readExtensions(ln, body[fec.LossReportLen:])
	}
	if rep.Expected == 0 {
		return // a stamp only (delay.go): nothing for the adapter
	}
	if splitOK {
		ln.lastSplit = split
	}
	ln.delay.stampDue = echo
	if ln.adapt == nil {
		return
	}
	// The lane's rate since the last report, or over the last timer tick
	// if higher: a flow that started since then sends faster than the
	// pings before it did, and a first report sized on their rate alone
	// gave a CUBIC flow's slow start 1:1 x2 on a bursty channel.
	// How many of the packets it sent over the same span were not
	// small tells ACKs and pings from a flow's data (fec.Adapter.SetSent).
	rate := ln.tickRate
	sent, large := ln.txPackets-ln.reportTx, ln.txLarge-ln.reportLarge
	if dt := s.now.Sub(ln.reportAt); ln.reportAt.IsZero() || dt >= minRateInterval {
		if !ln.reportAt.IsZero() {
			rate = max(rate, float64(sent)/dt.Seconds())
		}
		ln.reportAt, ln.reportTx, ln.reportLarge = s.now, ln.txPackets, ln.txLarge
	}
	ln.adapt.SetFill(rate * ln.cur.enc.FlushTimeout().Seconds())
	ln.adapt.SetSent(sent, large)
	s.observeHeld(ln) // one held still: its judgement is due now
	ln.held, ln.heldAt, ln.heldBound = rep, s.now, splitOK && split.outside(rep)
	burst, _ := ln.adapt.Burst()
	if r, st, ok := ln.channel.report(rep, split, splitOK, s.now, burst); ok {
		// The peer split the loss: the adapter hears it at once.
		ln.held = r
		s.observeNow(ln, st, echo)
		return
	}
	if !echo {
		s.observeHeld(ln) // no samples to wait for
		return
	}
	if _, known := ln.adapt.Loss(); !known {
		// Until the adapter has acted on a loss, a queue counts
		// against nothing (a queued path's ceiling is a share of the
		// loss it acted on): it hears the report at once, the path's
		// state unknown (its loss counts in full, runs as the
		// channel's), and the sooner its start-up guess gives way, the
		// less of a slow start runs in it.
		s.observeNow(ln, fec.PathUnknown, echo)
		return
	}
	// The samples that show the queue the report's losses met arrive
	// after it (delayjudge.go): the adapter hears it once they have.
	ln.heldUntil = s.now.Add(ln.delay.judgeLag())
}

// observeHeld gives ln's adapter the loss report it holds (if any),
// judged by the round-trip samples taken up to now.
func (s *Shard) observeHeld(ln *lane) {
	if ln.held.Expected == 0 || ln.adapt == nil {
		return
	}
	s.observeAs(ln, ln.delay.judge(s.now, ln.heldAt, ln.echoes()))
}

// observeNow gives ln's adapter the report it holds at once, judged st
// without waiting for samples: the next report's span starts here.
func (s *Shard) observeNow(ln *lane, st fec.PathState, echo bool) {
	ln.delay.judge(s.now, s.now, echo)
	s.observeAs(ln, st)
}

// observeAs gives ln's adapter the report it holds, the path judged st,
// with the bursts the peer's other lanes measured on the path since ln's
// began, and shares the bursts it measures with them.
func (s *Shard) observeAs(ln *lane, st fec.PathState) {
	ln.adapt.SetPath(st)
	if ln.heldBound {
		ln.adapt.BoundRuns()
	}
	if b, bound, ok := ln.cfg.Bursts.Recent(s.now, ln.pathAt); ok {
		ln.adapt.Borrow(b, bound)
	}
	ln.adapt.Observe(ln.held)
	if b, bound, ok := ln.adapt.Sampled(); ok {
		ln.cfg.Bursts.Note(b, bound, s.now)
	}
	if ln.largeThisTick() >= flowPackets {
		// A flow already sends this tick, past the packet that would
		// have told the adapter (sendData): clean reports of pings
		// before it that take the start-up guess off now, or size
		// parity for them, would leave the rest of its first window
		// bare (a Reno flow whose start went out so ran at 25 Mbit/s
		// of 200 at 1% loss).
		ln.adapt.Busy()
	}
	ln.held, ln.heldBound = fec.LossReport{}, false
	ln.applyFEC()
}

// readExtensions reads what follows a loss report of the peer's (b):
// the delay echo and the loss split, which it counts a slice by; split
// and ok: the report's split, if it carried one.
func (s *Shard) readExtensions(ln *lane, b []byte) (split splitCounts, ok bool) {
	if !ln.delay.readEcho(b, s.now) || !ln.splits() {
		return splitCounts{}, false
	}
	sent, c, ok := readSplit(b[delayEchoLen:])
	if ok {
		// rxDgrams counted this frame too.
		ln.split.note(s.now, ln.delay.peerStamp, sent, ln.rxDgrams-1)
	}
	return c, ok
}

// sendReport sends rep on ln, with the delay echo if echo (an empty rep
// with it: a stamp only).
func (s *Shard) sendReport(ln *lane, rep fec.LossReport, echo bool) bool {
	var buf [1 + fec.LossReportLen + delayEchoLen + splitLen]byte
	b, ok := ln.reportBody(buf[:0], rep, echo, s.now)
	return ok && s.sendControl(ln, b)
}

// reportBody appends the body of a loss report sent at now to b: what
// the peer's features let it read (control.go's frame format).
func (ln *lane) reportBody(b []byte, rep fec.LossReport, echo bool, now time.Time) ([]byte, bool) {
	start := len(b)
	b, err := rep.AppendBinary(append(b, ctlLossReport))
	if err != nil {
		return nil, false
	}
	if ln.peerFeatures&FeatureLossRuns == 0 {
		return b[:start+1+fec.LossReportLenV1], true // a peer that reads no runs
	}
	if !echo {
		return b, true
	}
	b = ln.delay.appendEcho(b, now)
	if ln.splits() {
		var c splitCounts
		if rep.Expected > 0 {
			c = ln.split.take()
		}
		b = appendSplit(b, ln.txDgrams, c)
	}
	return b, true
}
