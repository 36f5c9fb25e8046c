// Tests of Mode parsing and of the Adapter's choice of K:R and depth: the
// cheapest ratio that meets the target, bursts, an unreachable target, the
// partial table, falling back, noise, and the groups a lane's rate fills.

package fec

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	good := map[string]Mode{
		"off":    {Kind: ModeOff},
		" Auto ": {Kind: ModeAuto},
		"16:4":   {Kind: ModeFixed, K: 16, R: 4},
		"1:0":    {Kind: ModeFixed, K: 1, R: 0},
		"64:32":  {Kind: ModeFixed, K: 64, R: 32},
	}
	for in, want := range good {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, _ := ParseMode(got.String()); again != got {
			t.Errorf("String round trip of %+v gave %+v", got, again)
		}
	}
	bad := map[string]string{
		"":      "want off, auto or K:R",
		"on":    "want off, auto or K:R",
		"16":    "want off, auto or K:R",
		"a:b":   "decimal integers",
		"16:":   "decimal integers",
		"0:1":   "K must be 1..192",
		"193:1": "K must be 1..192",
		"8:-1":  "R must be 0..63",
		"8:64":  "R must be 0..63",
		"8:2:1": "decimal integers",
	}
	for in, msg := range bad {
		if _, err := ParseMode(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseMode(%q) error %v, want one mentioning %q", in, err, msg)
		}
	}
}

// defaultKs are the group sizes of DefaultAdaptConfig the rule weighs for
// a peer that reads long groups or not.
func defaultKs(long bool) []int {
	var ks []int
	for _, k := range DefaultAdaptConfig.Ks {
		if long || k <= LegacyMaxK {
			ks = append(ks, k)
		}
	}
	return ks
}

// defaultMaxR is the most parity DefaultAdaptConfig spends on a group of k
// data symbols (kk/2 at most, so the search stays in the interesting range).
func defaultMaxR(k int, long bool) int {
	_, r := FitRatio(k, DefaultAdaptConfig.MaxR, long)
	return min(k/2, r)
}

// cheapestMeeting is the brute-force answer to what the rule must choose:
// the smallest parity share (then the smaller K) meeting target at loss p.
func cheapestMeeting(p, target float64, long bool) (k, r int, ok bool) {
	for _, kk := range defaultKs(long) {
		for rr := 1; rr <= defaultMaxR(kk, long); rr++ {
			if ResidualLoss(kk, rr, p) <= target {
				if !ok || rr*k < r*kk || rr*k == r*kk && kk < k {
					k, r, ok = kk, rr, true
				}
				break
			}
		}
	}
	return k, r, ok
}

// The first interval the rule acts on gets what it asks for: the
// cheapest choice meeting the target, not the cheapest meeting half of it
// (the margin a choice is lowered with), which the start-up guess, more
// than enough at 1%, would otherwise settle it on.
func TestAdapterFirstInterval(t *testing.T) {
	for _, long := range []bool{false, true} {
		a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a.SetLongGroups(long)
		a.SetRTT(50 * time.Millisecond)
		k, r := a.Observe(LossReport{Expected: 10000, Received: 9900})
		wk, wr, _ := cheapestMeeting(0.01, a.Target(), long)
		if k != wk || r != wr {
			t.Errorf("long %v: first interval at 1%%: %d:%d, want the cheapest meeting %g: %d:%d", long, k, r, a.Target(), wk, wr)
		}
	}
}

func TestAdapterRule(t *testing.T) {
	t.Run("legacy peer", func(t *testing.T) { testAdapterRule(t, false) })
	t.Run("long groups", func(t *testing.T) { testAdapterRule(t, true) })
}

func testAdapterRule(t *testing.T, long bool) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetLongGroups(long)
	biggest := slices.Max(defaultKs(long))
	rep := func(loss float64) LossReport {
		return LossReport{Expected: 10000, Received: uint32(10000 * (1 - loss))}
	}
	// The start guess keeps a slow start through 5% loss near the
	// residual a TCP flow at a long round trip needs.
	if k, r := a.Ratio(); k != 16 || r != a.maxR(16, a.Depth()) || ResidualLoss(k, r, 0.05) > 3e-5 {
		t.Fatalf("start %d:%d, want the smallest K with the most parity the rule spends on it", k, r)
	}
	a.starting = 0 // the rule past a flow's start (TestAdapterStartupAllowance)
	// A clean first interval: the loss it is within chance of (1e-4),
	// the cheapest group with one parity symbol that meets the target.
	if k, r := a.Observe(rep(0)); k >= biggest || r != 1 || ResidualLossBurst(k, r, 1e-4, unknownBurst) > a.Target() {
		t.Fatalf("clean first interval of 10000: %d:%d, want one parity symbol per group below %d", k, r, biggest)
	}
	k, r := a.Observe(rep(0.05))
	wk, wr, _ := cheapestMeeting(0.05, a.Target(), long)
	if k != wk || r != wr || ResidualLoss(k, r, 0.05) > a.Target() {
		t.Fatalf("5%% loss: %d:%d, want the cheapest meeting %g: %d:%d", k, r, a.Target(), wk, wr)
	}
	// 20% loss: nothing reaches the target, but parity still cuts the
	// loss a lot: the rule spends near the ceiling.
	k, r = a.Observe(rep(0.2))
	least := 1.0
	for _, kk := range defaultKs(long) {
		_, most := FitRatio(kk, DefaultAdaptConfig.MaxR, long)
		least = min(least, ResidualLoss(kk, min(most, int(float64(kk)*DefaultAdaptConfig.MaxOverhead)), 0.2))
	}
	if ResidualLoss(k, r, 0.2) > 2*least || 4*r < k {
		t.Fatalf("20%% loss: %d:%d predicts %g, the least is %g", k, r, ResidualLoss(k, r, 0.2), least)
	}
	// 50% loss: parity cannot help (every K:R loses about half): the
	// cheapest.
	if k, r := a.Observe(rep(0.5)); k != biggest || r != 1 {
		t.Fatalf("50%% loss: %d:%d, want the cheapest %d:1", k, r, biggest)
	}
	a.Observe(rep(0.2))
	// Loss gone: the parity share only falls, down to none once
	// cleanReports reports in a row lost nothing.
	prevK, prevR := a.Ratio()
	for range 20 {
		k, r := a.Observe(rep(0))
		if r*prevK > prevR*k {
			t.Fatalf("parity share rose from %d:%d to %d:%d on a clean report", prevK, prevR, k, r)
		}
		prevK, prevR = k, r
	}
	if prevR != 0 {
		t.Fatalf("%d:%d after a long clean stretch, want no parity", prevK, prevR)
	}
	// A long path: the target falls to what TCP needs there, and the
	// ratio chosen at 1% loss meets it.
	a.SetRTT(50 * time.Millisecond)
	if tg := a.Target(); tg > 1e-6 || tg < 1e-7 {
		t.Fatalf("target at 50 ms: %g, want ~7e-7", tg)
	}
	for range 3 {
		k, r = a.Observe(rep(0.01))
	}
	if ResidualLoss(k, r, 0.01) > a.Target() || 2*r > k {
		t.Fatalf("1%% at 50 ms: %d:%d predicts %g, target %g", k, r, ResidualLoss(k, r, 0.01), a.Target())
	}
	a.SetRTT(0)
	if a.Target() != DefaultAdaptConfig.Target {
		t.Fatalf("unknown RTT: target %g", a.Target())
	}
	a = mustAdapter(t)
	// Tiny reports are merged, not acted on.
	if _, r := a.Observe(LossReport{Expected: 3, Received: 1}); r != 1 {
		t.Fatalf("3-symbol report moved R to %d", r)
	}
	fixed, _ := NewAdapter(Mode{Kind: ModeFixed, K: 8, R: 2}, AdaptConfig{})
	if k, r := fixed.Observe(rep(0.5)); k != 8 || r != 2 {
		t.Fatalf("fixed mode adapted to %d:%d", k, r)
	}
	off, _ := NewAdapter(Mode{Kind: ModeOff}, AdaptConfig{})
	if _, r := off.Ratio(); r != 0 {
		t.Fatalf("off mode R=%d", r)
	}
	if _, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{MinR: 3, MaxR: 2}); err == nil {
		t.Fatal("floor above ceiling accepted")
	}
	if _, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{Ks: []int{2}, MinR: 2}); err == nil {
		t.Fatal("a floor above the parity ceiling accepted")
	}
}

// freshAdapter is an auto Adapter at a 50 ms round trip that has acted
// on nothing yet (mustAdapter's clean first interval sets the floor for
// congestion to 0).
func freshAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetRTT(50 * time.Millisecond)
	return a
}

func mustAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.Observe(LossReport{Expected: 10000, Received: 10000})
	return a
}

// Reports with runs show bursts: the rule then predicts with the burst
// model and spends more parity than for independent loss of the same
// rate; reports with too few losses leave the burst estimate alone.
func TestAdapterSeesBursts(t *testing.T) {
	choose := func(runs uint32) (int, int) {
		a := mustAdapter(t)
		a.SetRTT(50 * time.Millisecond)
		var k, r int
		for range 5 {
			k, r = a.Observe(LossReport{Expected: 100000, Received: 99000, Runs: runs})
		}
		return k, r
	}
	ik, ir := choose(1000) // bursts of 1
	bk, br := choose(250)  // bursts of 4
	if br*ik <= ir*bk {
		t.Fatalf("bursts of 4 chose %d:%d, independent loss %d:%d", bk, br, ik, ir)
	}
	if ResidualLossBurst(ik, ir, 0.01, 1) > TCPResidual(50*time.Millisecond) {
		t.Fatalf("independent: %d:%d misses the target", ik, ir)
	}
	// Reports with few losses count together: no interval is ignored, so
	// one bursty interval does not set the estimate for good.
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// 40 lost in runs of 10 within groups, which the start-up guess
	// spreads MaxDepth apart on the wire (burstSample).
	a.Observe(LossReport{Expected: 100000, Received: 99960, Runs: 4})
	if want := wireBurst(0.0004, 10, MaxDepth); math.Abs(a.burst-want) > 1e-9 {
		t.Fatalf("burst estimate %v after 40 lost in 4 runs at depth %d, want %v", a.burst, MaxDepth, want)
	}
	for range 60 {
		a.Observe(LossReport{Expected: 100000, Received: 99998, Runs: 2}) // 2 lost apart
	}
	if a.burst > 1.1 {
		t.Fatalf("burst estimate %v after 120 independent losses in small reports", a.burst)
	}
}

// When no K:R reaches the target, the rule takes the cheapest within twice
// the least predicted loss instead of the parity ceiling.
func TestAdapterUnreachableTarget(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	var k, r int
	for range 5 {
		k, r = a.Observe(LossReport{Expected: 100000, Received: 99900, Runs: 4}) // 0.1% in bursts of 25
	}
	least := 1.0
	for _, kk := range defaultKs(false) {
		for rr := 1; rr <= defaultMaxR(kk, false); rr++ {
			least = min(least, ResidualLossBurst(kk, rr, 0.001, 25))
		}
	}
	got := ResidualLossBurst(k, r, 0.001, 25)
	if least <= a.Target() {
		t.Fatalf("the case is meant to be out of reach: least %g, target %g", least, a.Target())
	}
	if got > 2*least || 2*r == k {
		t.Fatalf("unreachable target: %d:%d predicts %g, least %g", k, r, got, least)
	}
}

// TestAdapterPartial: the parity table for groups that close early is the
// start-up guess's until a report measures loss (at most two parity
// symbols per data symbol, at least the guess's share of K before the
// start-up allowance: 6), then gives each group size the least parity
// predicted to meet the goal (never more than R), and fixed mode has none.
func TestAdapterPartial(t *testing.T) {
	for _, burst := range []float64{1, 4} {
		a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		a.SetRTT(50 * time.Millisecond)
		k0, r0 := a.Ratio()
		if g := a.Partial(); len(g) != k0 || g[1] != 6 || g[3] != 6 || g[4] != 8 || g[k0-1] != uint8(r0) {
			t.Fatalf("the guess's table %v (guess %d:%d), want 6 up to 3 data symbols, then 2 per data symbol up to R", g, k0, r0)
		}
		rep := LossReport{Expected: 100000, Received: 95000, Runs: uint32(5000 / burst)}
		var k, r int
		for range 4 {
			k, r = a.Observe(rep)
		}
		tbl := a.Partial()
		if len(tbl) != k {
			t.Fatalf("burst %g: table of %d for K=%d", burst, len(tbl), k)
		}
		// The table is for the wire's bursts as the depth spreads them.
		p, b := 0.05, spacedBurst(0.05, a.burst, a.Depth())
		goal := max(a.Target(), ResidualLossBurst(k, r, p, b))
		cheaper := 0
		for n := 1; n < k; n++ {
			rn := int(tbl[n])
			if rn < 1 || rn > r {
				t.Fatalf("burst %g: %d data symbols get %d parity, want 1..%d", burst, n, rn, r)
			}
			if rn < r && ResidualLossBurst(n, rn, p, b) > goal {
				t.Errorf("burst %g: %d:%d predicts %.2g, over the goal %.2g", burst, n, rn, ResidualLossBurst(n, rn, p, b), goal)
			}
			if rn > 1 && ResidualLossBurst(n, rn-1, p, b) <= goal {
				t.Errorf("burst %g: %d:%d would do, table says %d", burst, n, rn-1, rn)
			}
			if rn < r {
				cheaper++
			}
		}
		t.Logf("burst %g: %d:%d depth %d, goal %.2g, partial %v", burst, k, r, a.Depth(), goal, tbl[1:])
		if cheaper == 0 {
			t.Errorf("burst %g: no partial group is cheaper than R=%d", burst, r)
		}
	}
	fixed, _ := NewAdapter(Mode{Kind: ModeFixed, K: 16, R: 4}, AdaptConfig{})
	fixed.Observe(LossReport{Expected: 100000, Received: 95000})
	if fixed.Partial() != nil {
		t.Fatal("fixed mode has a partial table")
	}
}

// Once the path is clean the parity share falls within a window of
// reports (seconds), not over a long decay; and a clean report alone never
// raises it.
func TestAdapterFallsBackWithinWindow(t *testing.T) {
	for _, runs := range []uint32{5000, 1250} { // 5% independent, in bursts of 4
		a := mustAdapter(t)
		a.SetRTT(50 * time.Millisecond)
		for range 5 {
			a.Observe(LossReport{Expected: 100000, Received: 95000, Runs: runs})
		}
		k0, r0 := a.Ratio()
		for i := range lossWindow {
			k, r := a.Observe(LossReport{Expected: 100000, Received: 100000})
			if r*k0 > r0*k {
				t.Fatalf("runs %d: clean report %d raised %d:%d to %d:%d", runs, i, k0, r0, k, r)
			}
		}
		if k, r := a.Ratio(); float64(r)/float64(k) > 0.07 || a.Depth() != 1 {
			t.Fatalf("runs %d: %d:%d depth %d after %d clean reports (from %d:%d), want ≤ 7%% parity", runs, k, r, a.Depth(), lossWindow, k0, r0)
		}
	}
}

// Reports that scatter around one loss process (rate, bursts as the peer
// measures them at the depth in force, and the lane's fill, each ±20%) may
// move the choice by a step or so, but the choices after the first
// reports protect against the true process about as well as the best one
// can: the worst one's predicted loss stays within a small factor of the
// target, or, out of reach of it, of the least any choice predicts. Taken
// over 30 noise seeds: in half of them or more within 10× the target or
// 8× the least, in all of them within twice that. (One seed alone judged
// the noise, not the rule: at 8× the least, 11 of 30 seeds failed on
// bursts of 4 with the rule as it was before the burst assumption, and
// 13 of 30 after it, the median at 0.75 of the bound in both.)
func TestAdapterSteadyUnderNoise(t *testing.T) {
	for _, burst := range []float64{1, 4} {
		var ratios []float64
		for seed := range uint64(30) {
			ratios = append(ratios, steadyUnderNoise(t, burst, rand.New(rand.NewPCG(seed, 42))))
		}
		slices.Sort(ratios)
		med, worst := ratios[len(ratios)/2], ratios[len(ratios)-1]
		t.Logf("burst %g: worst choice against the bound, median over seeds %.2f, largest %.2f", burst, med, worst)
		if med > 1 || worst > 2 {
			t.Errorf("burst %g: worst choices at %.2f (median) and %.2f (largest) of the bound", burst, med, worst)
		}
	}
}

// steadyUnderNoise feeds 40 noisy reports of wire loss 5% in bursts of
// burst and returns the worst choice's predicted loss at the true process
// (after the first three), as a share of max(10·target, 8·least).
func steadyUnderNoise(t *testing.T, burst float64, rng *rand.Rand) float64 {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetFill(110)
	true0 := func(c choice) float64 { return ResidualLossBurst(c.k, c.r, 0.05, spacedBurst(0.05, burst, c.d)) }
	least := math.Inf(1)
	a.starting = 0 // the bound is the steady rule's: measured past a flow's start
	for _, k := range DefaultAdaptConfig.Ks {
		for _, d := range depths {
			kk := a.groupSize(k, d)
			least = min(least, true0(choice{kk, a.maxR(kk, d), d}))
		}
	}
	bound := max(10*a.Target(), 8*least)
	a.starting = startupReports
	worst := 0.0
	for i := range 40 {
		jit := func() float64 { return 0.8 + 0.4*rng.Float64() }
		a.SetFill(110 * jit())
		exp := uint32(10000 * jit())
		lost := uint32(float64(exp) * 0.05 * jit())
		// The peer counts runs within groups: at the depth in force.
		runs := uint32(max(1, float64(lost)/(spacedBurst(0.05, burst, a.Depth())*jit())))
		a.Observe(LossReport{Expected: exp, Received: exp - lost, Runs: runs})
		c := choice{a.k, a.r, a.d}
		if i >= startupReports+3 {
			worst = max(worst, true0(c))
		}
		if i >= startupReports && float64(c.r) > float64(c.k)*DefaultAdaptConfig.MaxOverhead+1 {
			t.Fatalf("burst %g: %+v over the parity ceiling", burst, c)
		}
	}
	return worst / bound
}

// A lane whose rate fills only groups smaller than any configured K may
// spend more than the parity ceiling on them (up to smallGroupR per
// group), and no block ever
// holds more than blockBudget symbols, so three size classes' blocks fit
// the peer's decoder store.
func TestAdapterSmallGroupsAndBlockBudget(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetFill(12)
	for range 4 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 1000})
	}
	if k, r := a.Ratio(); k > 12 || float64(r) <= float64(k)*DefaultAdaptConfig.MaxOverhead || r > smallGroupR {
		t.Fatalf("fill 12 at 5%%: %d:%d, want K ≤ 12 with more than %.0f%% and at most %d parity", k, r, 100*DefaultAdaptConfig.MaxOverhead, smallGroupR)
	}
	for _, fill := range []float64{0, 40, 300} {
		for _, runs := range []uint32{1000, 250, 100} {
			a := mustAdapter(t)
			a.SetRTT(50 * time.Millisecond)
			a.SetFill(fill)
			for range 6 {
				a.Observe(LossReport{Expected: 40000, Received: 38000, Runs: runs})
			}
			k, r := a.Ratio()
			if n := a.Depth() * (k + r); n > blockBudget {
				t.Errorf("fill %g, runs %d: %d:%d x%d holds %d symbols per block, over %d", fill, runs, k, r, a.Depth(), n, blockBudget)
			}
		}
	}
}
