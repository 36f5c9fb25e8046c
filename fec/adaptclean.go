// The Adapter's clean runs and start-up guess: a path that lost nothing
// for a few reports gets no parity, and a flow that starts where that
// said nothing of its loss gets the guess back (Busy).

package fec

import "slices"

// trackClean counts rep into the run of clean reports: after cleanReports
// of them parity goes off; a report that lost anything ends the run and,
// if parity was off, brings back MinR (and MinR for early-closing groups)
// before the rule has an interval to act on.
func (a *Adapter) trackClean(rep LossReport) {
	switch {
	case rep.Expected > rep.Received:
		a.clean, a.cleanSyms = 0, 0
		if a.r < a.cfg.MinR && !a.queuing() {
			a.r = a.cfg.MinR
			for i := range a.partial {
				a.partial[i] = uint8(a.cfg.MinR)
			}
			a.partialOK = true
		}
	case rep.Expected > 0:
		a.cleanSyms = satAdd(a.cleanSyms, rep.Expected)
		if a.clean++; a.clean >= cleanReports {
			// Parity off on a run that said nothing of a flow's
			// loss: before any interval was acted on, or on a lane
			// that had seen loss, fewer symbols than an interval
			// (on a clean path a sparse lane's bursts would take
			// the guess again after every quiet spell).
			a.guessOff = a.guessOff || (!a.pOK || a.p > 0 && a.cleanSyms < a.cfg.MinExpected) && a.r > 0
			a.parityOff()
		}
	}
}

// startGuess is the ratio until the first interval the rule acts on: the
// smallest K with the most parity the rule spends on it (NewAdapter says
// why), at the deepest interleave: the burst length is no more known than
// the loss (unknownBurst). A group that closes early carries at most
// smallGroupPer parity symbols per data symbol, never fewer than
// MaxOverhead's share of K: a slow start's groups get what a flow's
// groups of that size may get, and a lone packet on a lane not yet sized
// (an ACK lane's first, a ping) six parity symbols, not sixteen.
func (a *Adapter) startGuess() {
	a.fresh, a.starting = true, startupReports
	a.setDepth(a.deepest())
	a.k = slices.Min(a.cfg.Ks)
	a.r = a.maxR(a.k, a.d)
	a.guessR = a.r
	least := min(a.r, max(a.cfg.MinR, a.shareR(a.k)))
	for n := 1; n < a.k; n++ {
		a.partial[n] = uint8(min(a.r, max(least, smallGroupPer*n)))
	}
	a.partialOK = true
}

// deepest is the deepest interleave the rule weighs.
func (a *Adapter) deepest() int {
	d := 1
	for _, dd := range depths {
		if dd <= a.cfg.MaxDepth {
			d = dd
		}
	}
	return d
}

// Busy tells the rule that the lane now sends a flow: more packets
// larger than SmallSymbol within a timer tick than pings send. The
// start-up guess comes back for the flow's slow start, until the rule
// acts on the flow's first interval, which it takes as a first (fresh),
// if what is in force says nothing of what the flow needs:
//   - clean reports that said nothing of a flow's loss took parity off
//     (before the rule acted on any interval, or, on a lane that had
//     seen loss, holding fewer than MinExpected symbols together: a ping
//     or two, the keepalives of a lane idle between flows; a path that
//     lost none of six symbols may still lose 5%). A Reno flow that
//     started on a lane idle since a CUBIC flow, whose clean reports of 8
//     symbols had taken parity off on a channel losing 1%, lost 25
//     packets for good in its first second and ran at 71 Mbit/s of 200.
//   - or the parity in force was sized for few packets (sizedForFew),
//     at most twice until the rule sizes parity for a flow (few1,
//     few2): a trickle that sends bursts of a few packets (a video
//     call's frames, an ACK lane's rare large packets) is no flow, and
//     the guess at each burst would keep the rule from ever sizing it.
//     Twice, as a report of the pings before a flow that the rule acts
//     on while the flow's first window goes out sizes parity for few
//     again, and the flow needs the guess back (observeAs).
//
// It reports whether the ratio changed.
func (a *Adapter) Busy() bool {
	if a.mode.Kind != ModeAuto || a.guessing() {
		return false
	}
	few := !a.guessOff && a.sizedForFew()
	if !a.guessOff && !few || few && a.few2 {
		return false
	}
	a.few1, a.few2 = a.few1 || few, a.few1 && few
	a.guessOff = false
	a.guessAgain()
	return true
}

// sizedForFew reports whether the rule sends parity sized for a lane of
// few or small packets: for a sparse fill (a ping lane's groups of one),
// or for the target of small packets (SetSent). A flow's window in such
// groups is protected for a ping's needs: a Reno flow that started on a
// lane of an iperf3 control connection at 1:1 on a channel losing 5%
// (each packet lost with its one parity: 0.25% of them) lost one of its
// first 1359 packets, left slow start at a twentieth of the path's
// window, and ran at 50 Mbit/s of 200. A flow that fills two symbols or
// more per flush timeout is no ping lane: the rule sized its parity for
// it, and the guess again would undo that at every tick it sends in.
func (a *Adapter) sizedForFew() bool {
	return a.r > 0 && (a.small || a.sparse())
}

// guessing reports whether the start-up guess is in force for a first
// interval still to come: Busy would change nothing.
func (a *Adapter) guessing() bool {
	return a.fresh && a.k == slices.Min(a.cfg.Ks) && a.r == a.guessR && a.d == a.deepest()
}

// sparse reports whether the lane's groups close early with a packet or
// two (fewer than two data symbols per flush timeout): a ping lane, an
// ACK stream.
func (a *Adapter) sparse() bool { return a.fill > 0 && a.fill < sparseBelow }

// parityOff stops parity: a clean path (and with no parity, nothing to
// interleave). The partial table stays: a block still open under the
// previous R closes with it (a 0 there would mean the full R).
func (a *Adapter) parityOff() {
	a.r = 0
	a.setDepth(1)
}
