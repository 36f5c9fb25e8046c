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

func TestResidualLoss(t *testing.T) {
	// Hand-computed: 1:1 fails only if both are lost, losing the one data
	// symbol: residual = p²·2/2.
	if got := ResidualLoss(1, 1, 0.1); math.Abs(got-0.01) > 1e-12 {
		t.Fatalf("ResidualLoss(1,1,0.1) = %v, want 0.01", got)
	}
	// With R=0 the residual is the wire loss itself.
	if got := ResidualLoss(8, 0, 0.05); math.Abs(got-0.05) > 1e-12 {
		t.Fatalf("ResidualLoss(8,0,0.05) = %v, want 0.05", got)
	}
	if ResidualLoss(16, 4, 0.05) >= ResidualLoss(16, 3, 0.05) {
		t.Fatal("more parity must not predict more loss")
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
	if k, r := a.Ratio(); k != 16 || r != 4 {
		t.Fatalf("start %d:%d, want the smallest K with K/4 parity", k, r)
	}
	if k, r := a.Observe(rep(0)); k != biggest || r != 1 {
		t.Fatalf("clean path: %d:%d, want the cheapest %d:1", k, r, biggest)
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

func mustAdapter(t *testing.T) *Adapter {
	t.Helper()
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.Observe(LossReport{Expected: 10000, Received: 10000})
	return a
}

// TCPResidual: what one flow tolerates falls with the round-trip time
// (CUBIC's ¾ power at long RTTs, Reno's square at short ones).
func TestTCPResidual(t *testing.T) {
	for _, c := range []struct {
		rtt    time.Duration
		lo, hi float64
	}{
		{time.Millisecond, 1.5e-4, 2e-4},     // Reno-friendly region
		{50 * time.Millisecond, 6e-7, 8e-7},  // CUBIC region
		{200 * time.Millisecond, 4e-7, 5e-7}, // CUBIC: ∝ RTT^(-1/3)
	} {
		if got := TCPResidual(c.rtt); got < c.lo || got > c.hi {
			t.Errorf("TCPResidual(%s) = %g, want %g..%g", c.rtt, got, c.lo, c.hi)
		}
	}
	prev := 1.0
	for rtt := 100 * time.Microsecond; rtt < time.Second; rtt *= 2 {
		got := TCPResidual(rtt)
		if got > prev {
			t.Fatalf("TCPResidual rose from %g to %g at %s", prev, got, rtt)
		}
		prev = got
	}
}

func TestLossReportWire(t *testing.T) {
	r := LossReport{Expected: 1000, Received: 950, Unrecovered: 3, Runs: 20}
	b, _ := r.AppendBinary(nil)
	if len(b) != LossReportLen {
		t.Fatalf("encoded %d bytes", len(b))
	}
	got, err := ParseLossReport(b)
	if err != nil || got != r || got.Burst() != 2.5 {
		t.Fatalf("round trip %+v %v", got, err)
	}
	// Without Runs: what peers that do not count runs send.
	v1 := r
	v1.Runs = 0
	if got, err := ParseLossReport(b[:LossReportLenV1]); err != nil || got != v1 || got.Burst() != 0 {
		t.Fatalf("12-byte report: %+v %v", got, err)
	}
	if math.Abs(r.Loss()-0.05) > 1e-12 {
		t.Fatalf("Loss() = %v", r.Loss())
	}
	for _, bad := range []LossReport{{Expected: 1, Received: 2}, {Expected: 10, Received: 9, Unrecovered: 2}, {Expected: 10, Received: 8, Runs: 3}} {
		b, _ := bad.AppendBinary(nil)
		if _, err := ParseLossReport(b); err == nil {
			t.Errorf("accepted impossible %+v", bad)
		}
	}
	for _, n := range []int{11, 13, 15, 17} {
		if _, err := ParseLossReport(append(b, 0)[:n]); err == nil {
			t.Errorf("accepted a %d-byte report", n)
		}
	}
}

// TestDecoderLossReport: the decoder's counts match the loss applied.
func TestDecoderLossReport(t *testing.T) {
	wire := precomputeWire(t, 8, 2, 100, 100, 5) // 1 of 10 lost per group
	d := NewDecoder(DecoderConfig{MaxGroups: 8})
	for _, w := range wire {
		d.Push(w.m, w.b, t0, func([]byte) bool { return true })
	}
	rep := d.TakeLossReport()
	// Groups still in the window are not reported yet.
	if rep.Expected < 900 || rep.Expected > 1000 || math.Abs(rep.Loss()-0.1) > 1e-9 || rep.Unrecovered != 0 {
		t.Fatalf("report %+v loss %v, want 10%% of ≥90 groups, none unrecovered", rep, rep.Loss())
	}
	if again := d.TakeLossReport(); again != (LossReport{}) {
		t.Fatalf("report not reset: %+v", again)
	}
}

// runsMissingBelow counts runs of missing indices, across the 64-bit
// word boundaries.
func TestLostRuns(t *testing.T) {
	set := func(idx ...int) indexSet {
		var p indexSet
		for _, i := range idx {
			p.add(i)
		}
		return p
	}
	all := func(n int, except ...int) indexSet {
		var idx []int
	next:
		for i := range n {
			for _, e := range except {
				if i == e {
					continue next
				}
			}
			idx = append(idx, i)
		}
		return set(idx...)
	}
	for _, c := range []struct {
		name    string
		present indexSet
		n, want int
	}{
		{"none lost", all(20), 20, 0},
		{"one", all(20, 5), 20, 1},
		{"two apart", all(20, 5, 7), 20, 2},
		{"one run of three", all(20, 5, 6, 7), 20, 1},
		{"first and last", all(20, 0, 19), 20, 2},
		{"all lost", indexSet{}, 20, 1},
		{"all lost, every word", indexSet{}, MaxK + MaxR, 1},
		{"run across 63/64", all(80, 62, 63, 64, 65), 80, 1},
		{"64 alone", all(80, 64), 80, 1},
		{"63 and 65", all(80, 63, 65), 80, 2},
		{"tail beyond n ignored", all(10, 3), 10, 1},
		{"run across 127/128 and 191/192", all(MaxK+MaxR, 127, 128, 191, 192, 254), MaxK + MaxR, 3},
		{"the last index alone", all(MaxK+MaxR, MaxK+MaxR-1), MaxK + MaxR, 1},
	} {
		if got := c.present.runsMissingBelow(c.n); got != c.want {
			t.Errorf("%s: %d runs, want %d", c.name, got, c.want)
		}
	}
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
	a := mustAdapter(t)
	a.Observe(LossReport{Expected: 100000, Received: 99970, Runs: 3}) // 30 lost in bursts of 10
	if a.burst != 10 {
		t.Fatalf("burst estimate %v after 30 lost in 3 runs", a.burst)
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

// naiveBurst is the Gilbert chain written out plainly, one K:R at a time,
// with maps: the distribution of lost symbols over (state, lost) symbol by
// symbol.
func naiveBurst(k, r int, p, burst float64) float64 {
	n := k + r
	leave := 1 / burst
	enter := p * leave / (1 - p)
	g := map[int]float64{0: 1 - p}
	b := map[int]float64{1: p}
	for i := 1; i < n; i++ {
		ng, nb := map[int]float64{}, map[int]float64{}
		for x, v := range g {
			ng[x] += v * (1 - enter)
			nb[x+1] += v * enter
		}
		for x, v := range b {
			ng[x] += v * leave
			nb[x+1] += v * (1 - leave)
		}
		g, b = ng, nb
	}
	sum := 0.0
	for x := r + 1; x <= n; x++ {
		sum += (g[x] + b[x]) * float64(x) / float64(n)
	}
	return sum
}

// The chain's one pass per K gives, for every R, what the chain written
// out plainly for that K:R gives.
func TestResidualsOnePass(t *testing.T) {
	out := make([]float64, 17)
	residuals(32, 0.05, 4, out)
	for r, v := range out {
		if w := naiveBurst(32, r, 0.05, 4); math.Abs(v-w) > 1e-12 {
			t.Fatalf("32:%d: one pass %g, plain chain %g", r, v, w)
		}
	}
	if out[16] >= out[8] || out[8] >= out[1] {
		t.Fatalf("more parity must predict less loss: %v", out)
	}
}

// TestAdapterPartial: the parity table for groups that close early is unset
// until a report measures loss, then gives each group size the least parity
// predicted to meet the goal (never more than R), and fixed mode has none.
func TestAdapterPartial(t *testing.T) {
	for _, burst := range []float64{1, 4} {
		a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		a.SetRTT(50 * time.Millisecond)
		if a.Partial() != nil {
			t.Fatal("partial table before any report")
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

// spacedBurst and wireBurst are inverses, spacing shortens bursts, and an
// independent channel stays independent.
func TestSpacedBurst(t *testing.T) {
	for _, b := range []float64{1.5, 4, 10} {
		for _, d := range []int{2, 4} {
			s := spacedBurst(0.05, b, d)
			if s >= b || s < 1 {
				t.Errorf("burst %g at depth %d: %g", b, d, s)
			}
			if w := wireBurst(0.05, s, d); math.Abs(w-b) > 1e-9*b {
				t.Errorf("burst %g at depth %d: back to %g", b, d, w)
			}
		}
	}
	if s := spacedBurst(0.05, 1/(1-0.05), 4); math.Abs(s-1/(1-0.05)) > 1e-9 {
		t.Errorf("independent loss at depth 4: burst %g", s)
	}
}

// Reports that scatter around one loss process (rate, bursts as the peer
// measures them at the depth in force, and the lane's fill, each ±20%) may move the choice by a step or so, but every
// choice after the first reports protects against the true process about
// as well as the best one can: its predicted loss stays within a small
// factor of the target, or, out of reach of it, of the least any choice
// predicts.
func TestAdapterSteadyUnderNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, burst := range []float64{1, 4} {
		a := mustAdapter(t)
		a.SetRTT(50 * time.Millisecond)
		a.SetFill(110)
		true0 := func(c choice) float64 { return ResidualLossBurst(c.k, c.r, 0.05, spacedBurst(0.05, burst, c.d)) }
		least := math.Inf(1)
		for _, k := range DefaultAdaptConfig.Ks {
			for _, d := range depths {
				kk := a.groupSize(k, d)
				least = min(least, true0(choice{kk, a.maxR(kk), d}))
			}
		}
		bound := max(10*a.Target(), 8*least)
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
			if i >= 3 {
				worst = max(worst, true0(c))
			}
			if float64(c.r) > float64(c.k)*DefaultAdaptConfig.MaxOverhead+1 {
				t.Fatalf("burst %g: %+v over the parity ceiling", burst, c)
			}
		}
		t.Logf("burst %g: worst choice predicts %.2g at the true process; bound %.2g (target %.2g, least %.2g)", burst, worst, bound, a.Target(), least)
		if worst > bound {
			t.Errorf("burst %g: a choice predicts %.2g, over %.2g", burst, worst, bound)
		}
	}
}

// A group that closed early and lost all its (possibly partial) parity
// counts only its data in the report: its parity count is unknown, and
// counting the R its data announced would report loss and bursts that
// never happened. A full group that lost its parity still counts R.
func TestLossReportPartialGroupWithoutParity(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 8, R: 4})
	e.SetPartialParity([]uint8{0, 1, 1, 1})
	d := NewDecoder(DecoderConfig{MaxGroups: 2})
	rng := rand.New(rand.NewPCG(43, 44))
	for g := range 4 {
		n := 3
		if g%2 == 1 {
			n = 8
		}
		var syms [][]byte
		for i := range n {
			syms = append(syms, payload(rng, uint64(g*8+i), 200))
		}
		for _, w := range emitGroup(t, e, syms, t0) {
			if w.m.Kind == KindData {
				d.Push(w.m, w.b, t0, func([]byte) bool { return true })
			}
		}
	}
	// Slide the window past all four.
	for g := range 4 {
		_ = g
		b := payload(rng, 1000+uint64(g), 200)
		m, _ := e.Add(b, t0)
		d.Push(m, b, t0, func([]byte) bool { return true })
		e.Flush()
		for {
			if _, _, ok := e.NextParity(); !ok {
				break
			}
		}
	}
	rep := d.TakeLossReport()
	// Two partial groups: 3 data, parity not counted; two full: 8 + 4.
	want := LossReport{Expected: 2*3 + 2*(8+4), Received: 2*3 + 2*8, Runs: 2}
	if rep.Expected < want.Expected || rep.Expected > want.Expected+2 || rep.Expected-rep.Received != want.Expected-want.Received || rep.Runs != want.Runs {
		t.Fatalf("report %+v, want about %+v", rep, want)
	}
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

// A lane whose reports lose nothing for cleanReports in a row sends no
// parity, however little each report carried (a ping or ACK lane); the
// first report that loses anything brings MinR back at once, and the next
// full interval sizes R for the loss it shows.
func TestAdapterParityOffWhenClean(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, r := a.Ratio(); r == 0 {
		t.Fatal("a new lane starts without parity: its first loss is unprotected")
	}
	for i := range cleanReports {
		if _, r := a.Observe(LossReport{Expected: 4, Received: 4}); (r == 0) != (i == cleanReports-1) {
			t.Fatalf("after %d clean sparse reports: R %d", i+1, r)
		}
	}
	if _, r := a.Observe(LossReport{}); r != 0 {
		t.Fatalf("an empty report (nothing sent) brought parity back: R %d", r)
	}
	// Loss on a sparse lane: one of five lost.
	if _, r := a.Observe(LossReport{Expected: 5, Received: 4, Runs: 1}); r != DefaultAdaptConfig.MinR {
		t.Fatalf("first loss after a clean run: R %d, want MinR %d at once", r, DefaultAdaptConfig.MinR)
	}
	if p := a.Partial(); len(p) < 2 || p[1] != uint8(DefaultAdaptConfig.MinR) {
		t.Fatalf("first loss after a clean run: early groups get %v", p)
	}
	// Then a full interval at 5% random loss: the rule's choice.
	k, r := a.Observe(LossReport{Expected: 4000, Received: 3800, Runs: 190})
	if got := ResidualLoss(k, r, 0.05); got > a.Target() {
		t.Fatalf("after a 5%% interval: %d:%d predicts %.2g, target %.2g", k, r, got, a.Target())
	}
}

// On a sparse lane an early-closing group of n data symbols gets at most n
// parity (one per data symbol) whatever the loss, unless MinR asks for
// more.
func TestPartialParityAtMostOnePerSymbol(t *testing.T) {
	for _, p := range []float64{0, 0.01, 0.05, 0.2, 0.5} {
		for _, minR := range []int{1, 2} {
			out := make([]uint8, MaxK)
			partialParity(p, 1, 1e-7, minR, 16, out, true)
			for n := 1; n < len(out); n++ {
				if int(out[n]) > max(n, minR) || int(out[n]) < minR {
					t.Fatalf("p %.2f minR %d: %d parity for %d data symbols", p, minR, out[n], n)
				}
			}
		}
	}
	// A busy lane's early groups (a burst's tail) keep what the loss needs.
	out := make([]uint8, MaxK)
	partialParity(0.2, 1, 1e-7, 1, 16, out, false)
	if out[1] <= 1 {
		t.Fatalf("busy lane at 20%% loss: %d parity for a group of 1", out[1])
	}
}

// A group that never arrives at all (a single-packet group, as a ping or a
// lane without parity sends, lost whole) counts as one lost data symbol
// once it leaves the window, also when the window jumps past it; groups
// before the first one seen do not count.
func TestDecoderCountsUnseenGroups(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 8, MaxAhead: 32})
	ok := func([]byte) bool { return true }
	push := func(g uint32) {
		d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 16, R: 0}, []byte{byte(g), 1, 2, 3}, t0, ok)
	}
	for _, g := range []uint32{1000, 1001, 1003, 1004, 1006} { // 1002 and 1005 lost
		push(g)
	}
	for g := uint32(1007); g < 1030; g++ {
		push(g)
	}
	rep := d.TakeLossReport()
	if lost := rep.Expected - rep.Received; lost != 2 || rep.Runs != 0 || rep.Unrecovered != 2 {
		t.Fatalf("report %+v: want 2 lost, 2 unrecovered, no runs (their bursts are unknown)", rep)
	}
	// A jump well past the window (1030..1049 lost): the groups it
	// skipped never had a slot.
	for g := uint32(1050); g <= 1060; g++ {
		push(g)
	}
	rep = d.TakeLossReport()
	if lost := rep.Expected - rep.Received; lost != 20 {
		t.Fatalf("after a jump over 20 groups: report %+v, %d lost, want 20", rep, lost)
	}
}

// A group skipped inside the window counts as lost at its GroupTTL, while
// the window has not moved past it (a sparse lane's next packet may be
// seconds away); one that arrives within the TTL (reordered) does not.
func TestDecoderCountsSkippedGroupAtTTL(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 64})
	ok := func([]byte) bool { return true }
	push := func(g uint32, at time.Time) {
		d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 16, R: 0}, []byte{byte(g), 1, 2, 3}, at, ok)
	}
	push(2000, t0)
	push(2002, t0)                          // 2001 skipped
	push(2004, t0)                          // 2003 skipped
	push(2003, t0.Add(10*time.Millisecond)) // reordered, in time
	d.Tick(t0.Add(DefaultGroupTTL + time.Millisecond))
	rep := d.TakeLossReport()
	if lost := rep.Expected - rep.Received; lost != 1 {
		t.Fatalf("report %+v: want exactly group 2001 lost", rep)
	}
}

// A block without parity closes at its flush timeout (so a sparse lane's
// packets each get a group, and a lost one shows), and parity asked for
// while it is open starts with the next packet.
func TestEncoderNoParityBlockEnds(t *testing.T) {
	e, err := NewEncoder(EncoderConfig{K: 16, R: 0, FlushTimeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sym := []byte("ping ping ping")
	m1, _ := e.Add(sym, t0)
	m2, _ := e.Add(sym, t0.Add(time.Millisecond))
	m3, _ := e.Add(sym, t0.Add(10*time.Millisecond))
	if m1.Group != m2.Group || m3.Group == m2.Group {
		t.Fatalf("groups %d, %d, %d: want the first two together, the third (after the flush timeout) apart", m1.Group, m2.Group, m3.Group)
	}
	if err := e.SetRatio(16, 2); err != nil {
		t.Fatal(err)
	}
	m4, _ := e.Add(sym, t0.Add(11*time.Millisecond))
	if m4.R != 2 || m4.Group == m3.Group {
		t.Fatalf("after SetRatio(16, 2): %d:%d in group %d (was %d), want R=2 at once in a new group", m4.K, m4.R, m4.Group, m3.Group)
	}
}

// A skipped group counted lost at its TTL that arrives after all is not
// counted again; group ids wrap.
func TestDecoderSkippedGroupLateAndWrap(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 64})
	ok := func([]byte) bool { return true }
	push := func(g uint32, at time.Time) {
		d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 16, R: 0}, []byte{byte(g), 1, 2, 3}, at, ok)
	}
	base := uint32(0xfffffffe)
	push(base, t0)
	push(base+2, t0) // base+1 (0xffffffff) skipped, across the wrap
	push(base+3, t0) // 0
	d.Tick(t0.Add(DefaultGroupTTL + time.Millisecond))
	push(base+1, t0.Add(DefaultGroupTTL+2*time.Millisecond)) // late
	d.Tick(t0.Add(2*DefaultGroupTTL + 5*time.Millisecond))
	rep := d.TakeLossReport()
	if lost := rep.Expected - rep.Received; lost != 1 || rep.Unrecovered != 1 {
		t.Fatalf("report %+v: want the late group counted lost once", rep)
	}
}

// Loss reported while the path queues is congestion: it raises no parity,
// parity falls each report while the queue stands, down to none, and runs
// are not taken as bursts; the same reports on a path that does not queue
// raise parity. Once the queue drains, loss counts in full at once.
func TestAdapterQueuedLossAddsNoParity(t *testing.T) {
	share := func(k, r int) float64 { return float64(r) / float64(k) }
	steady := func() (*Adapter, float64) {
		a := mustAdapter(t)
		a.SetRTT(50 * time.Millisecond)
		var k, r int
		for range 4 {
			k, r = a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950}) // 5%, independent
		}
		return a, share(k, r)
	}
	heavy := LossReport{Expected: 20000, Received: 17000, Runs: 2600} // 15%
	open, calm := steady()
	for range 2 {
		open.Observe(heavy)
	}
	if k, r := open.Ratio(); share(k, r) <= calm {
		t.Fatalf("15%% loss on a path that does not queue left parity at %d:%d (5%%: %.3f)", k, r, calm)
	}
	q, _ := steady()
	q.SetPath(PathQueued)
	last := calm
	for i := range 20 {
		k, r := q.Observe(heavy)
		if share(k, r) > last {
			t.Fatalf("report %d while queued raised parity to %d:%d", i, k, r)
		}
		last = share(k, r)
	}
	if k, r := q.Ratio(); r != 0 {
		t.Fatalf("20 reports of congestion left parity at %d:%d", k, r)
	}
	q.Observe(LossReport{Expected: 100, Received: 90}) // short of MinExpected: trackClean only
	if _, r := q.Ratio(); r != 0 {
		t.Fatalf("loss while queued brought back parity (R %d)", r)
	}
	q.SetPath(PathClear)
	if k, r := q.Observe(heavy); share(k, r) <= calm {
		t.Fatalf("15%% loss after the queue drained: %d:%d", k, r)
	}
	// Seen lossy with the path clear: a queue later (anyone's) does not
	// take that protection away while it comes and goes, but one that
	// stands through floorReports reports does.
	c := mustAdapter(t)
	c.SetRTT(50 * time.Millisecond)
	c.SetPath(PathClear)
	for range 4 {
		c.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950})
	}
	for i := range 20 {
		c.SetPath(PathQueued)
		for range floorReports - 1 {
			c.Observe(heavy)
		}
		if k, r := c.Ratio(); share(k, r) < calm {
			t.Fatalf("round %d: a queue that comes and goes took the parity 5%% loss on a clear path needs (%.3f) down to %d:%d", i, calm, k, r)
		}
		c.SetPath(PathClear)
		c.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950})
	}
	// A queue that the sample after finds drained, over and over, came
	// and went: it does not stand, however long it goes on.
	for i := range 4 * floorReports {
		c.SetPath([]PathState{PathQueued, PathDrained}[i%2])
		c.Observe(heavy)
	}
	if k, r := c.Ratio(); share(k, r) < calm {
		t.Fatalf("a queue found and then drained, report after report, took the floor: %d:%d", k, r)
	}
	c.SetPath(PathQueued)
	for range floorReports + 10 {
		c.Observe(heavy)
	}
	if k, r := c.Ratio(); r != 0 {
		t.Fatalf("a queue that stood through %d reports left parity at %d:%d", floorReports+10, k, r)
	}
	// A clear report's floor is its own interval's loss, not the
	// window's: a flow's start-up overshoot (lost with the path's state
	// not yet known) is not the channel's loss once the path is clear.
	o := mustAdapter(t)
	o.SetRTT(50 * time.Millisecond)
	o.Observe(LossReport{Expected: 20000, Received: 14000, Runs: 300}) // 30%, state unknown
	o.SetPath(PathClear)
	o.Observe(LossReport{Expected: 20000, Received: 20000})
	o.SetPath(PathQueued)
	for range floorReports - 1 {
		o.Observe(heavy)
	}
	if k, r := o.Ratio(); r != 0 {
		t.Fatalf("a start-up's overshoot stayed a floor for congestion: %d:%d", k, r)
	}
	bursts := func(queued bool) float64 {
		a := mustAdapter(t)
		if queued {
			a.SetPath(PathQueued)
		}
		for range 4 {
			a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 100}) // runs of 10
		}
		return a.burst
	}
	if b := bursts(true); b != 0 {
		t.Fatalf("tail drops in runs while queued taken as bursts of %v", b)
	}
	if b := bursts(false); b < 5 {
		t.Fatalf("runs of 10 on a path that does not queue: burst estimate %v", b)
	}
}

func TestLossAtMost(t *testing.T) {
	r := LossReport{Expected: 1000, Received: 900, Unrecovered: 40, Runs: 60}
	if got := lossAtMost(r, 0.2); got != r {
		t.Fatalf("within the ceiling: %+v", got)
	}
	if got, want := lossAtMost(r, 0.05), (LossReport{Expected: 1000, Received: 950, Unrecovered: 40, Runs: 50}); got != want {
		t.Fatalf("5%%: %+v, want %+v", got, want)
	}
	if got := lossAtMost(r, 0); got.Loss() != 0 || got.Unrecovered != 0 || got.Runs != 0 {
		t.Fatalf("none: %+v", got)
	}
}
