package fec

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var simTable = flag.Bool("fec.sim", false, "print the full loss-simulation table (docs/BENCHMARKS.md, \"FEC: benchmarks and loss simulation\")")

// imixSize is a 7:4:1 mix of small, medium and full-size inner packets, each
// plus the 24 bytes of AEAD counter and tag the data symbol carries.
func imixSize(i int) int {
	switch i % 12 {
	case 0, 2, 4, 6, 7, 9, 11:
		return 40 + 24
	case 1, 5, 8, 10:
		return 576 + 24
	}
	return 1400 + 24
}

type simResult struct {
	k, r                 int
	p                    float64
	inner, lost          int // inner packets sent, still lost after FEC
	dataBytes, parBytes  int
	dataSyms, paritySyms int
	delays               []int // per recovered packet, in inner packets
}

func (s simResult) residual() float64 { return float64(s.lost) / float64(s.inner) }
func (s simResult) symOverhead() float64 {
	return float64(s.paritySyms) / float64(s.dataSyms)
}
func (s simResult) byteOverhead() float64 { return float64(s.parBytes) / float64(s.dataBytes) }

// delay returns the mean and 99th percentile recovery delay in packets.
func (s simResult) delay() (mean float64, p99 int) {
	if len(s.delays) == 0 {
		return 0, 0
	}
	slices.Sort(s.delays)
	sum := 0
	for _, d := range s.delays {
		sum += d
	}
	return float64(sum) / float64(len(s.delays)), s.delays[len(s.delays)*99/100]
}

// simStep is the simulated time between inner packets: 100k packets/s, so
// that every size class's groups fill before the 5 ms flush timeout for
// K ≤ 32 (the rarest IMIX class, 1 packet in 12, then runs at 8.3k/s).
const simStep = 10 * time.Microsecond

// simulate sends n inner packets through the real Encoder and Decoder over a
// wire that drops each symbol independently with probability p, one every
// simStep.
func simulate(t testing.TB, k, r int, p float64, n int, seed uint64) simResult {
	return simulateBurst(t, k, r, p, 1, n, seed, imixSize)
}

// fullSize is uniform full-size traffic: one size class, so every group's
// symbols are consecutive on the wire.
func fullSize(int) int { return 1400 + 24 }

// simulateBurst is simulate over a Gilbert channel: loss comes in bursts
// of mean length burst (≤ 1: independent loss), with stationary loss p,
// as ResidualLossBurst models it, for inner packets of size(i) bytes. With
// mixed sizes the classes' groups interleave on the wire, so a burst
// spreads over several groups and hurts less than the model predicts for
// consecutive symbols.
func simulateBurst(t testing.TB, k, r int, p, burst float64, n int, seed uint64, size func(int) int) simResult {
	return simRun(t, simConfig{k: k, r: r, p: p, burst: burst, n: n, seed: seed, size: size, step: simStep})
}

// simConfig is one simulation run: K:R, the channel, n inner packets of
// size(i) bytes one every step, and whether groups that close early carry
// the adapter's partial-parity table for this channel (as auto mode does)
// or the full R.
type simConfig struct {
	k, r     int
	p, burst float64
	n        int
	seed     uint64
	size     func(int) int
	step     time.Duration
	partial  bool
}

// gilbertChannel draws, symbol by symbol, whether a Gilbert channel of
// stationary loss p in bursts of mean length burst (≤ 1: independent
// loss) loses it.
func gilbertChannel(rng *rand.Rand, p, burst float64) func() bool {
	bad := rng.Float64() < p
	return func() bool {
		if burst <= 1 {
			return rng.Float64() < p
		}
		lost := bad
		if bad {
			bad = rng.Float64() >= 1/burst
		} else {
			bad = rng.Float64() < min(1, p/burst/(1-p))
		}
		return lost
	}
}

func simRun(t testing.TB, c simConfig) simResult {
	k, r, p, burst, n, seed := c.k, c.r, c.p, c.burst, c.n, c.seed
	rng := rand.New(rand.NewPCG(seed, uint64(k*100+r)))
	lose := gilbertChannel(rng, p, burst)
	e, err := NewEncoder(EncoderConfig{K: k, R: r})
	if err != nil {
		t.Fatal(err)
	}
	if c.partial {
		var tbl [MaxK]uint8
		partialParity(p, burst, ResidualLossBurst(k, r, p, burst), 1, r, tbl[:k], false)
		e.SetPartialParity(tbl[:k])
	}
	d := NewDecoder(DecoderConfig{})
	res := simResult{k: k, r: r, p: p, inner: n}
	got := make([]bool, n)
	wireLost := make([]bool, n)
	sent := 0
	deliver := func(b []byte) bool {
		seq := int(binary.BigEndian.Uint64(b))
		if got[seq] {
			t.Fatalf("packet %d delivered twice", seq)
		}
		got[seq] = true
		if wireLost[seq] {
			res.delays = append(res.delays, sent-1-seq)
		}
		return true
	}
	buf := make([]byte, MaxSymbolLen)
	now := t0
	wire := func(m Meta, b []byte) {
		if !lose() {
			d.Push(m, b, now, deliver)
		} else if m.Kind == KindData {
			wireLost[binary.BigEndian.Uint64(b)] = true
		}
	}
	drain := func() {
		for {
			m, b, ok := e.NextParity()
			if !ok {
				return
			}
			res.paritySyms++
			res.parBytes += len(b)
			wire(m, b)
		}
	}
	for i := range n {
		size := c.size(i)
		b := buf[:size]
		binary.BigEndian.PutUint64(b, uint64(i))
		m, err := e.Add(b, now)
		if err != nil {
			t.Fatal(err)
		}
		sent++
		res.dataSyms++
		res.dataBytes += size
		wire(m, b)
		drain()
		now = now.Add(c.step)
		if e.Tick(now) {
			drain()
		}
	}
	e.Flush()
	drain()
	for i := range got {
		if !got[i] {
			res.lost++
		}
	}
	return res
}

const targetLoss, targetOverhead = 0.002, 0.25

// TestLossSimulationTarget asserts the target with the smallest
// group that meets it at ≤25% overhead (12:3; 8:2 does not, see the loss
// simulation in docs/BENCHMARKS.md) and with what auto mode picks at 5% loss.
func TestLossSimulationTarget(t *testing.T) {
	n := 200000
	if testing.Short() || raceEnabled {
		n = 60000
	}
	a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	ak, ar := a.Observe(LossReport{Expected: 100000, Received: 95000})
	for _, kr := range [][2]int{{12, 3}, {ak, ar}} {
		res := simulate(t, kr[0], kr[1], 0.05, n, 1)
		t.Logf("%d:%d at 5%%: post-FEC loss %.3f%%, overhead %.1f%% symbols", kr[0], kr[1], 100*res.residual(), 100*res.symOverhead())
		if res.symOverhead() > targetOverhead*1.001 {
			t.Errorf("%d:%d overhead %.3f over %.2f", kr[0], kr[1], res.symOverhead(), targetOverhead)
		}
		if res.residual() > targetLoss {
			t.Errorf("%d:%d at 5%% loss: post-FEC loss %.4f, target ≤ %.4f", kr[0], kr[1], res.residual(), targetLoss)
		}
	}
}

// TestLossSimulationMatchesModel checks the simulator against the closed
// form the adaptive rule uses, so neither can silently drift.
func TestLossSimulationMatchesModel(t *testing.T) {
	res := simulate(t, 8, 2, 0.10, 60000, 2)
	want := ResidualLoss(8, 2, 0.10)
	if got := res.residual(); got < want*0.8 || got > want*1.2 {
		t.Fatalf("8:2 at 10%%: simulated %.4f, model %.4f", got, want)
	}
	// Bursty loss (mean burst 4) on one size class: the chain model
	// against the channel, and bursts hurt a group that independent loss
	// of the same rate would not.
	for _, kr := range [][2]int{{16, 4}, {32, 8}} {
		res := simulateBurst(t, kr[0], kr[1], 0.05, 4, 100000, 3, fullSize)
		want := ResidualLossBurst(kr[0], kr[1], 0.05, 4)
		if got := res.residual(); got < want*0.75 || got > want*1.25 {
			t.Errorf("%d:%d at 5%% in bursts of 4: simulated %.4f, model %.4f", kr[0], kr[1], got, want)
		}
		if ind := ResidualLoss(kr[0], kr[1], 0.05); want < 3*ind {
			t.Errorf("%d:%d: bursts predict %.2g, independent loss %.2g", kr[0], kr[1], want, ind)
		}
	}
	if a, b := ResidualLossBurst(16, 4, 0.05, 1), ResidualLoss(16, 4, 0.05); a != b {
		t.Fatalf("burst 1 is independent loss: %g vs %g", a, b)
	}
}

// TestLossSimulationTable prints the loss-simulation table of
// docs/BENCHMARKS.md:
//
//	go test -count=1 -cpu 1 -run TestLossSimulationTable -v ./fec/ -args -fec.sim
func TestLossSimulationTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the simulation table")
	}
	ratios := [][2]int{{4, 1}, {8, 1}, {16, 1}, {8, 2}, {10, 2}, {12, 2}, {16, 2}, {12, 3}, {16, 3}, {16, 4}, {20, 4}, {32, 5}, {32, 8}, {32, 11}, {32, 16}}
	var sb strings.Builder
	sb.WriteString("| K:R | overhead (symbols) | overhead (bytes, IMIX) | loss | post-FEC loss | model | delay mean / p99 (pkts) | mean ms @10k pps | mean ms @100k pps | meets 5% target |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, kr := range ratios {
		for _, p := range []float64{0.01, 0.05, 0.10} {
			res := simulate(t, kr[0], kr[1], p, 200000, 3)
			mean, p99 := res.delay()
			meets := ""
			if p == 0.05 {
				meets = "no"
				if res.residual() <= targetLoss && res.symOverhead() <= targetOverhead*1.001 {
					meets = "**yes**"
				}
			}
			fmt.Fprintf(&sb, "| %d:%d | %.1f%% | %.1f%% | %.0f%% | %.3f%% | %.3f%% | %.1f / %d | %.2f | %.3f | %s |\n",
				kr[0], kr[1], 100*res.symOverhead(), 100*res.byteOverhead(), 100*p,
				100*res.residual(), 100*ResidualLoss(kr[0], kr[1], p),
				mean, p99, mean/10, mean/100, meets)
		}
	}
	t.Log("\n" + sb.String())
}

// TestAdaptiveChoiceTable prints what auto mode settles on for steady wire
// loss, without and with a known round-trip time (docs/BENCHMARKS.md,
// "Adaptive rule"):
//
//	go test -count=1 -run TestAdaptiveChoiceTable -v ./fec/ -args -fec.sim
func TestAdaptiveChoiceTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	rtts := []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond}
	var sb strings.Builder
	sb.WriteString("| wire loss |")
	for _, rtt := range rtts {
		if rtt == 0 {
			sb.WriteString(" RTT unknown |")
		} else {
			fmt.Fprintf(&sb, " RTT %s |", rtt)
		}
	}
	sb.WriteString("\n|---|")
	sb.WriteString(strings.Repeat("---|", len(rtts)))
	sb.WriteString("\n| target |")
	for _, rtt := range rtts {
		a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		a.SetRTT(rtt)
		fmt.Fprintf(&sb, " %.1g |", a.Target())
	}
	sb.WriteString("\n")
	for _, p := range []float64{0, 0.001, 0.01, 0.02, 0.05, 0.10, 0.20} {
		fmt.Fprintf(&sb, "| %g%% |", 100*p)
		for _, rtt := range rtts {
			a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
			a.SetRTT(rtt)
			var k, r int
			for range 10 {
				k, r = a.Observe(LossReport{Expected: 100000, Received: uint32(100000 * (1 - p))})
			}
			fmt.Fprintf(&sb, " %d:%d (%.0f%%) → %.0e |", k, r, 100*float64(r)/float64(k), ResidualLoss(k, r, p))
		}
		sb.WriteString("\n")
	}
	t.Log("\n" + sb.String())
}

// TestBurstSimulationTable prints the bursty-loss table of
// docs/BENCHMARKS.md: independent against Gilbert loss (mean burst 4) at
// 5%, simulated and modelled, and what auto mode settles on at 50 ms RTT
// when the loss reports carry runs:
//
//	go test -count=1 -run TestBurstSimulationTable -v ./fec/ -args -fec.sim
func TestBurstSimulationTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	var sb strings.Builder
	sb.WriteString("| K:R | parity | 5% independent: simulated / model | 5% in bursts of 4: simulated / model |\n|---|---|---|---|\n")
	for _, kr := range [][2]int{{16, 4}, {16, 8}, {32, 8}, {32, 11}, {32, 16}} {
		ind := simulate(t, kr[0], kr[1], 0.05, 400000, 5)
		bur := simulateBurst(t, kr[0], kr[1], 0.05, 4, 400000, 5, fullSize)
		fmt.Fprintf(&sb, "| %d:%d | %.0f%% | %.2g / %.2g | %.2g / %.2g |\n", kr[0], kr[1], 100*float64(kr[1])/float64(kr[0]),
			ind.residual(), ResidualLoss(kr[0], kr[1], 0.05), bur.residual(), ResidualLossBurst(kr[0], kr[1], 0.05, 4))
	}
	sb.WriteString("\n| wire loss | burst 1 | burst 2 | burst 4 | burst 8 |\n|---|---|---|---|---|\n")
	for _, p := range []float64{0.01, 0.05} {
		fmt.Fprintf(&sb, "| %g%% |", 100*p)
		for _, b := range []float64{1, 2, 4, 8} {
			a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
			a.SetRTT(50 * time.Millisecond)
			lost := uint32(100000 * p)
			var k, r int
			for range 10 {
				// The peer counts runs within groups: at the depth in force.
				rep := LossReport{Expected: 100000, Received: 100000 - lost, Runs: uint32(float64(lost) / spacedBurst(p, b, a.Depth()))}
				k, r = a.Observe(rep)
			}
			fmt.Fprintf(&sb, " %d:%d x%d (%.0f%%) → %.0e |", k, r, a.Depth(), 100*float64(r)/float64(k), ResidualLossBurst(k, r, p, spacedBurst(p, b, a.Depth())))
		}
		sb.WriteString("\n")
	}
	t.Log("\n" + sb.String())
}

// TestSizeClassByteOverhead asserts the size classes' target on IMIX
// traffic whose groups fill: parity bytes cost at most 5 points more than
// parity symbols, at no more post-FEC loss than the model predicts for the
// same K:R on one class.
func TestSizeClassByteOverhead(t *testing.T) {
	n := 200000
	if testing.Short() || raceEnabled {
		n = 50000
	}
	for _, kr := range [][2]int{{12, 3}, {16, 4}, {32, 8}} {
		res := simulate(t, kr[0], kr[1], 0.05, n, 4)
		model := ResidualLoss(kr[0], kr[1], 0.05)
		t.Logf("%d:%d at 5%%: %.1f%% symbols, %.1f%% bytes, post-FEC %.3f%% (model %.3f%%)",
			kr[0], kr[1], 100*res.symOverhead(), 100*res.byteOverhead(), 100*res.residual(), 100*model)
		if res.byteOverhead() > res.symOverhead()+0.05 {
			t.Errorf("%d:%d: byte overhead %.1f%% over symbol overhead %.1f%% + 5 points", kr[0], kr[1], 100*res.byteOverhead(), 100*res.symOverhead())
		}
		if res.residual() > 1.25*model+20/float64(n) {
			t.Errorf("%d:%d: post-FEC loss %.4f%%, model %.4f%%", kr[0], kr[1], 100*res.residual(), 100*model)
		}
	}
}

// TestSizeClassTable prints the size-class table of docs/BENCHMARKS.md:
// IMIX at a rate where every class's groups fill (100k packets/s) and at
// one where the rarest class's groups close on the flush timeout (10k/s),
// the latter with full R on such groups and with the adapter's partial
// parity table:
//
//	go test -count=1 -run TestSizeClassTable -v ./fec/ -args -fec.sim
func TestSizeClassTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	var sb strings.Builder
	sb.WriteString("| K:R | loss | IMIX rate | early groups get | overhead (symbols) | overhead (bytes) | post-FEC loss | model (full groups) |\n|---|---|---|---|---|---|---|---|\n")
	for _, kr := range [][2]int{{12, 3}, {16, 4}, {32, 8}, {32, 11}} {
		for _, p := range []float64{0.01, 0.05} {
			for _, rc := range []struct {
				step    time.Duration
				partial bool
			}{{simStep, false}, {100 * time.Microsecond, false}, {100 * time.Microsecond, true}} {
				res := simRun(t, simConfig{k: kr[0], r: kr[1], p: p, burst: 1, n: 200000, seed: 6, size: imixSize, step: rc.step, partial: rc.partial})
				early := "R"
				if rc.partial {
					early = "table"
				}
				fmt.Fprintf(&sb, "| %d:%d | %.0f%% | %.0fk/s | %s | %.1f%% | %.1f%% | %.3f%% | %.3f%% |\n", kr[0], kr[1], 100*p,
					float64(time.Second/rc.step)/1000, early, 100*res.symOverhead(), 100*res.byteOverhead(), 100*res.residual(), 100*ResidualLoss(kr[0], kr[1], p))
			}
		}
	}
	t.Log("\n" + sb.String())
}

// loopResult is one closed-loop run: auto mode against a channel.
type loopResult struct {
	simResult
	k, r, d int // the choice at the end
}

// simAdaptive closes the loop: n full-size inner packets one every step
// through the real Encoder, a Gilbert channel and the real Decoder, whose
// loss report goes to an Adapter (RTT 50 ms) every second of simulated
// time, and the encoder takes its ratio, depth and partial table, as a lane
// does. Loss and overhead are counted after the first warm packets.
func simAdaptive(t testing.TB, p, burst float64, step time.Duration, n, warm, maxDepth int, seed uint64, long bool) loopResult {
	rng := rand.New(rand.NewPCG(seed, 77))
	lose := gilbertChannel(rng, p, burst)
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{MaxDepth: maxDepth})
	if err != nil {
		t.Fatal(err)
	}
	a.SetRTT(50 * time.Millisecond)
	a.SetLongGroups(long)
	k, r := a.Ratio()
	e, _ := NewEncoder(EncoderConfig{K: k, R: r, FlushTimeout: FlushFor(50 * time.Millisecond)})
	d := NewDecoder(DecoderConfig{})
	var res loopResult
	got := make([]bool, n)
	deliver := func(b []byte) bool { got[binary.BigEndian.Uint64(b)] = true; return true }
	buf := make([]byte, MaxSymbolLen)
	now, nextReport := t0, t0.Add(time.Second)
	counting := false
	wire := func(m Meta, b []byte) {
		if counting {
			if m.Kind == KindParity {
				res.paritySyms++
				res.parBytes += len(b)
			} else {
				res.dataSyms++
				res.dataBytes += len(b)
			}
		}
		if !lose() {
			d.Push(m, b, now, deliver)
		}
	}
	drain := func() {
		for {
			m, b, ok := e.NextParity()
			if !ok {
				return
			}
			wire(m, b)
		}
	}
	for i := range n {
		counting = i >= warm
		b := buf[:fullSize(i)]
		binary.BigEndian.PutUint64(b, uint64(i))
		m, _ := e.Add(b, now)
		wire(m, b)
		drain()
		now = now.Add(step)
		if e.Tick(now) {
			drain()
		}
		d.Tick(now)
		if !now.Before(nextReport) {
			nextReport = nextReport.Add(time.Second)
			a.SetFill(float64(e.FlushTimeout()) / float64(step))
			k, r := a.Observe(d.TakeLossReport())
			_ = e.SetRatio(k, r)
			e.SetDepth(a.Depth())
			e.SetPartialParity(a.Partial())
		}
	}
	e.Flush()
	drain()
	res.inner = n - warm
	for i := warm; i < n; i++ {
		if !got[i] {
			res.lost++
		}
	}
	res.k, res.r = a.Ratio()
	res.d = a.Depth()
	return res
}

// TestAdaptiveLoopBursts: in closed loop against 5% loss in bursts of 4 at
// 100 Mbit/s on a 50 ms path, interleaving lets auto mode lose several
// times less, and under the UDP target of 0.1%, within the parity ceiling.
func TestAdaptiveLoopBursts(t *testing.T) {
	// Seeded, so the same run everywhere; it is long enough for a few
	// hundred losses without interleaving (about 25 s under -race).
	n, warm := 300000, 50000
	// 9k packets/s: 100 Mbit/s of full-size packets, as the e2e test.
	flat := simAdaptive(t, 0.05, 4, 112*time.Microsecond, n, warm, 1, 8, false)
	deep := simAdaptive(t, 0.05, 4, 112*time.Microsecond, n, warm, MaxDepth, 8, false)
	for _, x := range []struct {
		name string
		res  loopResult
	}{{"depth 1", flat}, {"depth ≤ 4", deep}} {
		t.Logf("%s: %d:%d depth %d, parity %.1f%%, post-FEC loss %.4f%%", x.name, x.res.k, x.res.r, x.res.d,
			100*x.res.symOverhead(), 100*x.res.residual())
	}
	if deep.d == 1 {
		t.Errorf("auto mode did not interleave under bursty loss")
	}
	if deep.residual() > flat.residual()/3 || deep.residual() > 0.001 || deep.symOverhead() > DefaultAdaptConfig.MaxOverhead+0.01 {
		t.Errorf("interleaving: loss %.4f%% at %.1f%% parity, without %.4f%% at %.1f%%",
			100*deep.residual(), 100*deep.symOverhead(), 100*flat.residual(), 100*flat.symOverhead())
	}
}

// TestSlowBurstTable prints what the closed loop of TestAdaptiveLoopBursts
// settles on as the lane's rate falls (5% loss in bursts of 4, RTT 50 ms,
// two seeds): a slower lane fills fewer symbols per flush timeout, so its
// blocks are shorter and a burst of consecutive frames takes more of a
// group.
//
//	go test -count=1 -run TestSlowBurstTable -v ./fec/ -args -fec.sim
func TestSlowBurstTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	var sb strings.Builder
	sb.WriteString("| packets/s | seed | settles on | parity | post-FEC loss |\n|---|---|---|---|---|\n")
	for _, step := range []time.Duration{112 * time.Microsecond, 300 * time.Microsecond, 625 * time.Microsecond, 2 * time.Millisecond} {
		for _, seed := range []uint64{8, 9} {
			res := simAdaptive(t, 0.05, 4, step, 60000, 10000, MaxDepth, seed, false)
			fmt.Fprintf(&sb, "| %.0f | %d | %d:%d ×%d | %.1f%% | %.3f%% |\n", float64(time.Second)/float64(step), seed,
				res.k, res.r, res.d, 100*res.symOverhead(), 100*res.residual())
		}
	}
	t.Log("\n" + sb.String())
}

// TestAdaptiveLoopLongGroups: in closed loop against independent loss at
// 200 Mbit/s on a 50 ms path (18k full-size packets/s, so groups of 192
// fill within the flush timeout), a peer that reads long groups gets the
// same protection for less parity: at 5%, 28 parity per 192 instead of 15
// per 64.
func TestAdaptiveLoopLongGroups(t *testing.T) {
	n, warm := 200000, 40000
	if testing.Short() || raceEnabled {
		n, warm = 60000, 20000
	}
	step := 55 * time.Microsecond
	for _, p := range []float64{0.01, 0.05} {
		legacy := simAdaptive(t, p, 1, step, n, warm, MaxDepth, 11, false)
		long := simAdaptive(t, p, 1, step, n, warm, MaxDepth, 11, true)
		for _, x := range []struct {
			name string
			res  loopResult
		}{{"legacy", legacy}, {"long", long}} {
			t.Logf("%g%% loss, %s: %d:%d depth %d, parity %.1f%% of data, post-FEC loss %.4f%%", 100*p, x.name,
				x.res.k, x.res.r, x.res.d, 100*x.res.symOverhead(), 100*x.res.residual())
		}
		if long.k <= LegacyMaxK || legacy.k > LegacyMaxK || legacy.r > LegacyMaxR {
			t.Errorf("%g%%: long groups %d:%d, legacy %d:%d", 100*p, long.k, long.r, legacy.k, legacy.r)
		}
		if long.symOverhead() > 0.8*legacy.symOverhead() {
			t.Errorf("%g%%: long groups spend %.1f%% parity, legacy %.1f%%", 100*p, 100*long.symOverhead(), 100*legacy.symOverhead())
		}
		// Both aim for ~7e-7; a run of this length sees a few losses at most.
		if long.residual() > 1e-4 || legacy.residual() > 1e-4 {
			t.Errorf("%g%%: post-FEC loss %.5f%% (long), %.5f%% (legacy)", 100*p, 100*long.residual(), 100*legacy.residual())
		}
	}
}
