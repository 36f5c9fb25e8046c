// Tests of the rule's depth: a change of depth leaves burst samples out,
// so the rule changes it only for clearly less parity (stepDown).

package fec

import (
	"fmt"
	"testing"
	"time"
)

// A falling loss at a measured burst, and a rate that moves the groups
// the lane fills, move the choice among groups of nearly the same parity
// share at depths 1, 2 and 4: the rule changes depth only for clearly
// less parity, so the burst samples the reports carry are not left out
// report after report (setDepth).
func TestAdapterDepthHoldsForSmallGains(t *testing.T) {
	const burst = 2.74
	for _, fills := range [][]float64{{189, 240}, {189, 260, 200}, {192, 230}} {
		a := mustAdapter(t)
		a.SetRTT(75 * time.Millisecond)
		a.SetPath(PathClear)
		a.SetLongGroups(true)
		changes, last, seq, first := 0, 0, "", 0.0
		for i, p := range []float64{0.0112, 0.0107, 0.0105, 0.0099, 0.0094, 0.0091, 0.0087, 0.0085, 0.0082, 0.0080} {
			a.SetFill(fills[i%len(fills)])
			a.burst, a.bound = burst, false // as measured: the samples' noise is not what is tested
			n := uint32(15000)
			lost := uint32(p * float64(n))
			runs := uint32(float64(lost) / spacedBurst(p, burst, a.Depth()))
			k, r := a.Observe(LossReport{Expected: n, Received: n - lost, Runs: runs})
			if i > 0 && a.Depth() != last {
				changes++
			}
			last = a.Depth()
			seq += fmt.Sprintf(" %d:%d x%d", k, r, a.Depth())
			if i == 0 {
				first = float64(r) / float64(k)
			}
		}
		if changes > 1 {
			t.Errorf("fills %v: the depth changed %d times as the loss fell from 1.1%% to 0.8%% in bursts of %v:%s", fills, changes, burst, seq)
		}
		if k, r := a.Ratio(); float64(r)/float64(k) > first {
			t.Errorf("fills %v: parity share %.3f after the loss fell by a quarter, %.3f at first:%s", fills, float64(r)/float64(k), first, seq)
		}
	}
}

// stepDown from a choice with more parity than needed: the cheapest with
// margin when it is at the current depth or clearly cheaper; a cheaper
// one within depthGain at another depth gives way to the cheapest at the
// current depth; and a choice that misses the target moves to any depth.
func TestAdapterStepDown(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(75 * time.Millisecond)
	a.SetLongGroups(true)
	a.SetFill(240)
	var c candidates
	p, burst := 0.0105, 2.74
	a.predict(&c, p, burst)
	predict := func(x choice) float64 { return ResidualLossBurst(x.k, x.r, p, spacedBurst(p, burst, x.d)) }
	best, ok := a.best(&c, a.target/2)
	if !ok || best.d == 1 {
		t.Fatalf("cheapest with margin %+v (ok %v): the case needs it off depth 1", best, ok)
	}
	// Over-protected at depth 1, the best within depthGain of it: a
	// cheaper choice at depth 1.
	cur := choice{a.groupSize(MaxK, 1), 40, 1}
	if worthDepth(best, cur) {
		t.Fatalf("the case needs the best %+v within depthGain of %+v", best, cur)
	}
	if d, ok := a.stepDown(&c, cur, predict(cur), true, predict); !ok || d.d != 1 || d.r >= cur.r || predict(d) > a.target/2 {
		t.Fatalf("from %+v: %+v (moved %v), want a cheaper choice at depth 1 meeting half the target (best overall %+v)", cur, d, ok, best)
	}
	// Clearly more parity than the best: it moves there.
	far := choice{a.groupSize(MaxK, 1), 48, 1}
	if d, ok := a.stepDown(&c, far, predict(far), true, predict); !ok || d != best {
		t.Fatalf("from %+v: %+v (moved %v), want the best %+v", far, d, ok, best)
	}
	// Missing the target: any depth.
	miss := choice{20, 4, 1} // within depthGain of the best, too
	if worthDepth(best, miss) {
		t.Fatalf("the case needs the best %+v within depthGain of %+v", best, miss)
	}
	if now := predict(miss); now <= a.target {
		t.Fatalf("%+v predicts %v, within the target %v: the case needs one that misses", miss, now, a.target)
	}
	if d, ok := a.stepDown(&c, miss, predict(miss), true, predict); !ok || d != best {
		t.Fatalf("from %+v (missing the target): %+v (moved %v), want the best %+v", miss, d, ok, best)
	}
}
