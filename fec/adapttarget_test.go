package fec

import (
	"slices"
	"testing"
	"time"
)

// A lane of small packets (a download's ACKs, pings) aims for Target, a
// lane of a flow's data for what TCP needs at the path's round trip: on
// a channel losing 1% independently an ACK lane's groups of 20 get at
// most 2 parity, not the 4 a data lane's would. A lane with a flow's
// data beside another's ACKs is no lane of small packets.
func TestAdapterSmallDataTarget(t *testing.T) {
	tcp := TCPResidual(50 * time.Millisecond)
	choose := func(sent, large uint64) (k, r int, target float64) {
		a := freshAdapter(t)
		a.SetFill(20)
		a.SetSent(sent, large)
		a.Borrow(1.01, false) // independent loss, measured
		a.SetPath(PathClear)
		a.Observe(LossReport{Expected: 3000, Received: 2970, Runs: 30})
		k, r = a.Ratio()
		return k, r, a.Target()
	}
	k, r, target := choose(3000, 1) // ACKs, and the request that began the download
	if target != DefaultAdaptConfig.Target || r > 2 || k < 16 {
		t.Fatalf("ACKs: %d:%d for target %v, want at most 2 parity for groups of about 20, aiming for %v", k, r, target, DefaultAdaptConfig.Target)
	}
	for _, c := range []struct{ sent, large uint64 }{{3000, 3000}, {9380, 780}} {
		if k, r, target := choose(c.sent, c.large); target != tcp || r < 4 {
			t.Fatalf("%d of %d packets large: %d:%d for target %v, want 4 or more parity, aiming for %v", c.large, c.sent, k, r, target, tcp)
		}
	}
	// Nothing sent says nothing; a flow's data after ACKs brings back
	// the round trip's target.
	a := freshAdapter(t)
	a.SetSent(100, 0)
	a.SetSent(0, 0)
	if a.Target() != DefaultAdaptConfig.Target {
		t.Fatalf("nothing sent after ACKs: target %v", a.Target())
	}
	a.SetSent(100, 2)
	a.SetRTT(100 * time.Millisecond)
	if want := TCPResidual(100 * time.Millisecond); a.Target() != want {
		t.Fatalf("data after ACKs, then a new round trip: target %v, want %v", a.Target(), want)
	}
	if !SmallSymbol(52+24) || SmallSymbol(1000+24) {
		t.Fatal("an ACK's symbol not small, or a segment's small")
	}
}

// A first interval that lost nothing is taken as losing up to one in its
// size: a flow's slow start runs in the choice, and a clean first
// interval of 223 symbols is one flow start in nine at 1% loss.
func TestAdapterCleanFirstIntervalKeepsProtection(t *testing.T) {
	a := freshAdapter(t)
	a.SetFill(41)
	a.SetPath(PathClear)
	a.Observe(LossReport{Expected: 223, Received: 223})
	k, r := a.Ratio()
	p, _ := a.Loss()
	if r < 2 || a.Depth() == 1 || ResidualLossBurst(k, r, p, spacedBurst(p, unknownBurst, a.Depth())) > a.Target() {
		t.Fatalf("a clean first interval of 223: %d:%d x%d, want parity for the loss it is within chance of (%.2g) in bursts assumed, interleaved", k, r, a.Depth(), p)
	}
	// A clean path still loses its parity after cleanReports.
	observeN(a, cleanReports-1, LossReport{Expected: 2000, Received: 2000})
	if _, r := a.Ratio(); r != 0 {
		t.Fatalf("after %d clean reports: R %d, want none", cleanReports, r)
	}
}

// Clean reports of a lane idle between flows (a few symbols each) take
// parity off, and the next flow's first window brings the start-up guess
// back (Busy); a clean run that carried a flow's worth does not.
func TestAdapterIdleCleanRunGivesNextFlowTheGuess(t *testing.T) {
	lossy := LossReport{Expected: 3000, Received: 2970, Runs: 30}
	for _, c := range []struct {
		name  string
		clean uint32
		guess bool
	}{
		{"idle between flows", 8, true},
		{"a flow on a clean path", 2000, false},
	} {
		a := freshAdapter(t)
		a.SetPath(PathClear)
		observeN(a, 3, lossy)
		observeN(a, cleanReports, LossReport{Expected: c.clean, Received: c.clean})
		if _, r := a.Ratio(); r != 0 {
			t.Fatalf("%s: after %d clean reports R %d, want none", c.name, cleanReports, r)
		}
		if got := a.Busy(); got != c.guess {
			k, r := a.Ratio()
			t.Fatalf("%s: a flow starts: Busy %v (%d:%d), want %v", c.name, got, k, r, c.guess)
		}
		if k, r := a.Ratio(); c.guess && (k != slices.Min(DefaultAdaptConfig.Ks) || r != a.maxR(k, a.Depth())) {
			t.Fatalf("%s: a flow starts: %d:%d, want the start-up guess", c.name, k, r)
		}
	}
}

// A clean run too small to say anything keeps the guess for the next
// flow even when the rule acts on an interval during it (the previous
// flow's last report, pending, fills one), and the next flow's first
// interval after Busy is a first interval: lost nothing, it counts as
// losing one in its size.
func TestAdapterGuessAfterIdleRunIsFirst(t *testing.T) {
	a := freshAdapter(t)
	a.SetPath(PathClear)
	observeN(a, 3, LossReport{Expected: 3000, Received: 2970, Runs: 30})
	a.Observe(LossReport{Expected: 150, Received: 149, Runs: 1}) // pending
	observeN(a, 7, LossReport{Expected: 8, Received: 8})         // acts at the 7th
	if _, r := a.Ratio(); r != 0 {
		t.Fatalf("idle after a flow: R %d, want none", r)
	}
	if !a.Busy() || !a.fresh {
		t.Fatalf("a flow after an idle run over which the rule acted: guess back %v, its first interval next %v", a.r == a.maxR(a.k, a.d), a.fresh)
	}
	a.SetFill(41)
	a.Observe(LossReport{Expected: 223, Received: 223})
	if k, r := a.Ratio(); r < 2 {
		t.Fatalf("the flow's clean first interval: %d:%d, want parity for the loss it is within chance of", k, r)
	}
}

// A flow that starts on a lane whose parity was sized for few or small
// packets (a ping lane's groups of one, an ACK lane's target) gets the
// start-up guess and TCP's target (Busy); a clean small lane, and a lane
// already sized for a flow (a slow one too: two symbols or more per flush
// timeout), keep what they have.
func TestAdapterFlowAfterFewGetsGuess(t *testing.T) {
	lossy := func(n uint32) LossReport { return LossReport{Expected: n, Received: n - n/20, Runs: n / 20} }
	for _, c := range []struct {
		name        string
		fill        float64
		sent, large uint64
		rep         LossReport
		guess       bool
	}{
		{"pings at 5% loss", 0.5, 300, 0, lossy(300), true},
		{"ACKs at 5% loss", 40, 3000, 0, lossy(3000), true},
		{"a slow flow's data at 5% loss", 3, 300, 300, lossy(300), false},
		{"pings on a clean path", 0.5, 300, 0, LossReport{Expected: 300, Received: 300}, false},
		{"a flow at 5% loss", 40, 3000, 3000, lossy(3000), false},
	} {
		a := freshAdapter(t)
		a.SetFill(c.fill)
		a.SetSent(c.sent, c.large)
		a.Borrow(1.01, false) // independent loss, measured
		a.SetPath(PathClear)
		observeN(a, cleanReports, c.rep)
		k0, r0 := a.Ratio()
		got := a.Busy()
		k, r := a.Ratio()
		if got != c.guess {
			t.Fatalf("%s at %d:%d: a flow starts: Busy %v (%d:%d), want %v", c.name, k0, r0, got, k, r, c.guess)
		}
		if !c.guess {
			if k != k0 || r != r0 {
				t.Fatalf("%s: Busy moved %d:%d to %d:%d", c.name, k0, r0, k, r)
			}
			continue
		}
		if k != slices.Min(DefaultAdaptConfig.Ks) || r != a.maxR(k, a.Depth()) || a.Depth() != MaxDepth || !a.fresh {
			t.Fatalf("%s: a flow starts at %d:%d x%d (first interval next %v), want the start-up guess", c.name, k, r, a.Depth(), a.fresh)
		}
		if want := TCPResidual(50 * time.Millisecond); a.Target() != want {
			t.Fatalf("%s: a flow starts: target %v, want TCP's %v", c.name, a.Target(), want)
		}
		if a.Busy() {
			t.Fatalf("%s: Busy brought the guess back twice", c.name)
		}
	}
}

// A lane sized for few packets whose "flow" turned out to be a trickle
// (the rule, acting on the intervals after the guess, sized it for few
// again) gets the guess at most twice; once the rule sized parity for a
// flow, a later flow after pings gets it again.
func TestAdapterTrickleGetsAtMostTwoGuesses(t *testing.T) {
	lossy := LossReport{Expected: 300, Received: 285, Runs: 15}
	a := freshAdapter(t)
	a.SetFill(0.5)
	a.Borrow(1.01, false)
	a.SetPath(PathClear)
	observeN(a, 2, lossy)
	if !a.Busy() {
		k, r := a.Ratio()
		t.Fatalf("a flow after pings at %d:%d: no guess", k, r)
	}
	a.Observe(lossy) // the "flow" sent as few (or pings before it)
	if !a.Busy() {
		k, r := a.Ratio()
		t.Fatalf("a report of few while the flow starts (%d:%d): no second guess", k, r)
	}
	a.Observe(lossy) // the "flow" sent as few
	if a.Busy() {
		k, r := a.Ratio()
		t.Fatalf("a trickle sized for few again (%d:%d): a third guess", k, r)
	}
	a.SetFill(40)
	a.Observe(LossReport{Expected: 3000, Received: 2850, Runs: 150}) // a flow's own interval
	for range 8 {                                                    // pings after it: the fill halves per report
		a.SetFill(0.5)
		a.Observe(lossy)
	}
	if !a.Busy() {
		k, r := a.Ratio()
		t.Fatalf("a flow after pings that followed a flow (%d:%d): no guess", k, r)
	}
}

// A flow's start (the guess and the first startupReports intervals) may
// spend up to one parity symbol per data symbol where MaxOverhead cannot
// meet the target, within the block budget; past it, the rule is back
// within MaxOverhead. ACKs and pings get no such allowance.
func TestAdapterStartupAllowance(t *testing.T) {
	a := freshAdapter(t)
	a.SetLongGroups(true)
	if k, r := a.Ratio(); r != k || a.Depth() != MaxDepth {
		t.Fatalf("start-up guess %d:%d x%d, want one parity per data symbol, %d deep", k, r, a.Depth(), MaxDepth)
	}
	// A slow start's first interval: 5% lost, too few to measure the
	// bursts, which the rule assumes.
	rep := LossReport{Expected: 300, Received: 285, Runs: 6}
	a.SetFill(44) // groups of 11 at depth 4
	k, r := a.Observe(rep)
	if r <= int(float64(k)*DefaultAdaptConfig.MaxOverhead) || r > k && k >= 16 {
		t.Fatalf("first choice %d:%d x%d, want above MaxOverhead, at most k", k, r, a.Depth())
	}
	if got := a.maxR(48, 4); 4*(48+got) > blockBudget {
		t.Fatalf("groups of 48 four deep may carry %d parity: over the block budget %d", got, blockBudget)
	}
	a.SetFill(400)
	observeN(a, startupReports, rep)
	if k, r := a.Ratio(); float64(r) > float64(k)*DefaultAdaptConfig.MaxOverhead {
		t.Fatalf("past the start: %d:%d, over MaxOverhead", k, r)
	}
	acks := freshAdapter(t)
	acks.SetSent(1000, 0)
	if got := acks.maxR(16, 4); got != int(16*DefaultAdaptConfig.MaxOverhead) {
		t.Fatalf("an ACK lane's group of 16 at start: %d parity, want MaxOverhead's", got)
	}
}
