// The closed loop in simulation: auto mode's Adapter fed by the Decoder's
// loss reports and driving the Encoder, over bursty channels, slow lanes
// and long groups.

package fec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

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
	deliver := func(b []byte, _ bool) bool { got[binary.BigEndian.Uint64(b)] = true; return true }
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

// TestSlowFlowSmallGroups: a flow's data at 800 packets/s through 5% loss
// in bursts of 4 (groups of five within the flush timeout at depth 2) may
// carry two parity symbols per data symbol, and loses several times less
// than at one (about 1%); a ping or ACK lane's groups keep at most one.
func TestSlowFlowSmallGroups(t *testing.T) {
	for _, seed := range []uint64{8, 9} {
		res := simAdaptive(t, 0.05, 4, 1250*time.Microsecond, 30000, 5000, MaxDepth, seed, false)
		if res.residual() > 0.004 {
			t.Errorf("seed %d: %d:%d x%d lost %.3f%% at %.0f%% parity, want under 0.4%%", seed, res.k, res.r, res.d, 100*res.residual(), 100*res.symOverhead())
		}
	}
	a := freshAdapter(t)
	a.SetFill(10)
	if got := a.maxR(3, 1); got != 2*3 {
		t.Fatalf("a flow's group of 3: at most %d parity, want %d", got, 2*3)
	}
	a.SetSent(1000, 0) // ACKs
	if got := a.maxR(3, 1); got != 3 {
		t.Fatalf("an ACK lane's group of 3: at most %d parity, want 3", got)
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
	for _, step := range []time.Duration{112 * time.Microsecond, 300 * time.Microsecond, 625 * time.Microsecond, 1250 * time.Microsecond, 2 * time.Millisecond} {
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
