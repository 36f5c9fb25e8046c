// The parity of groups that close early (Partial), the cap on small
// packets' while the lane is quiet (SetTickFill), and a flow after a quiet
// spell (Restart).

package fec

// Partial is the table for Encoder.SetPartialParity: for a group that
// closes before K (a slow lane's flush timeout, a rare size class), the
// least parity predicted to keep its residual loss within the target (or
// within what the full K:R predicts, if that is more), at most R. A group
// of 2 data symbols needs far fewer parity symbols than one of 32 for the
// same residual, and a slow lane sends little else. Under the start-up
// guess, what startGuess gives; nil outside auto mode: such groups then
// get R.
func (a *Adapter) Partial() []uint8 {
	if !a.partialOK {
		return nil
	}
	k, _ := a.Ratio()
	return a.partial[:k]
}

// SetTickFill tells the rule how many data symbols the lane sent per
// flush timeout over its last timer tick, and whether any was larger than
// SmallSymbol (a flow's data). Under two, and none large (sparseBelow:
// pings, ACKs, nothing since a flow ended), the lane is quiet. The rule's
// ratio and table follow the lane's rate only at the peer's next report,
// about a second on; until then a ping would close a group of one under a
// table sized for the flow before it (after a bulk flow through 5% loss
// in bursts, 200 pings at 10 ms carried seven parity symbols each).
// Quiet, a group of small packets that closes early gets at most one
// parity symbol per data symbol (Encoder.SetSmallCap, Quiet) until a tick
// that is not, or Loud (the shard calls it, and Busy, at a flow's fourth
// large packet in a tick). A flow's packets are never capped so: a slow
// start paced over half a long round trip (Linux) or a lone
// retransmission after a timeout keeps the start-up guess or the table.
// It reports whether Quiet changed.
func (a *Adapter) SetTickFill(n float64, large bool) bool {
	return a.setQuiet(n < sparseBelow && !large)
}

// Loud tells the rule that the lane sends a flow since its last tick
// (the shard's Busy): not quiet. It reports whether Quiet changed.
func (a *Adapter) Loud() bool { return a.setQuiet(false) }

// Quiet reports whether the lane's last timer tick was quiet (SetTickFill):
// its encoder caps its small packets' groups (Encoder.SetSmallCap).
func (a *Adapter) Quiet() bool { return a.quiet }

// Restart tells the rule that a flow starts on a lane that has been quiet
// for a while (the shard's restartAfter): a new flow's slow start, not a
// pause within one. If the rule stopped assuming bursts it never measured
// (split reports under a queue that stood, endAssumption), it assumes
// them again, and the start-up guess comes back (as in Busy, but for the
// trickle guard, few1 and few2): that evidence was the queue of the flow
// before. A BBR flow's standing queue ended the assumption on a channel
// losing 5% in bursts of 4; the Reno flow after it on the same lane
// started in 115:19 x1, sized for independent loss, lost 594 packets for
// good in its first second and ran at 33 Mbit/s of 200. It reports
// whether the ratio changed.
func (a *Adapter) Restart() bool {
	if a.mode.Kind != ModeAuto || a.burst != 0 || a.noRuns || a.assumed < assumeReports {
		return false
	}
	a.assumed = 0
	a.guessAgain()
	return true
}

// guessAgain brings the start-up guess back for a flow that starts now
// (Busy, Restart): no clean run counted, TCP's target, the guess.
func (a *Adapter) guessAgain() {
	a.clean, a.cleanSyms, a.small = 0, 0, false
	a.setTarget()
	a.startGuess()
}

func (a *Adapter) setQuiet(q bool) bool {
	if q == a.quiet {
		return false
	}
	a.quiet = q
	return true
}

// sparseBelow is the fill (data symbols per flush timeout) under which a
// lane closes its groups with a packet or two: a ping lane, an ACK
// stream.
const sparseBelow = 2
