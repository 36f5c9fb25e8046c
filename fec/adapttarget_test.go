package fec

import (
	"slices"
	"testing"
	"time"
)

// A lane of small packets (a download's ACKs, pings) aims for Target, a
// lane of a flow's data for what TCP needs at the path's round trip: on
// a channel losing 1% independently an ACK lane's groups of 20 get at
// most 2 parity, not the 4 a data lane's would.
func TestAdapterSmallDataTarget(t *testing.T) {
	tcp := TCPResidual(50 * time.Millisecond)
	choose := func(mean float64) (k, r int, target float64) {
		a := freshAdapter(t)
		a.SetFill(20)
		a.SetDataLen(mean)
		a.Borrow(1.01, false) // independent loss, measured
		a.SetPath(PathClear)
		a.Observe(LossReport{Expected: 3000, Received: 2970, Runs: 30})
		k, r = a.Ratio()
		return k, r, a.Target()
	}
	k, r, target := choose(80)
	if target != DefaultAdaptConfig.Target || r > 2 || k < 16 {
		t.Fatalf("ACKs of 80 bytes: %d:%d for target %v, want at most 2 parity for groups of about 20, aiming for %v", k, r, target, DefaultAdaptConfig.Target)
	}
	k, r, target = choose(1400)
	if target != tcp || r < 4 {
		t.Fatalf("data of 1400 bytes: %d:%d for target %v, want 4 or more parity, aiming for %v", k, r, target, tcp)
	}
	// Nothing sent says nothing; a flow's data after ACKs brings back
	// the round trip's target.
	a := freshAdapter(t)
	a.SetDataLen(80)
	a.SetDataLen(0)
	if a.Target() != DefaultAdaptConfig.Target {
		t.Fatalf("nothing sent after ACKs: target %v", a.Target())
	}
	a.SetDataLen(smallData + 1)
	a.SetRTT(100 * time.Millisecond)
	if want := TCPResidual(100 * time.Millisecond); a.Target() != want {
		t.Fatalf("data after ACKs, then a new round trip: target %v, want %v", a.Target(), want)
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
	if r < 2 || a.Depth() != MaxDepth {
		t.Fatalf("a clean first interval of 223: %d:%d x%d, want parity for the loss it is within chance of, %d deep", k, r, a.Depth(), MaxDepth)
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
		if k, r := a.Ratio(); c.guess && (k != slices.Min(DefaultAdaptConfig.Ks) || r != a.maxR(k)) {
			t.Fatalf("%s: a flow starts: %d:%d, want the start-up guess", c.name, k, r)
		}
	}
}
