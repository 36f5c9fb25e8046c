package fec

import (
	"slices"
	"testing"
	"time"
)

// A quiet lane's groups that close early carry at most one parity symbol
// per data symbol, whatever table the flow before sized (the rule's own
// for a bulk flow through bursty loss) or the start-up guess. A flow
// again (Loud), or a tick with a large packet however slow (a paced slow
// start), restores the table; a quiet tick on a lane without parity
// changes nothing.
func TestAdapterQuietCapsPartial(t *testing.T) {
	a := freshAdapter(t)
	a.SetFill(90)
	a.SetSent(3000, 3000)
	a.SetPath(PathClear)
	for range 3 {
		a.Observe(LossReport{Expected: 9000, Received: 8550, Runs: 110}) // 5%, bursts of 4
	}
	k, r := a.Ratio()
	flow := slices.Clone(a.Partial())
	if r == 0 || len(flow) < 2 || flow[1] < 2 {
		t.Fatalf("a bulk flow through bursty loss: %d:%d, table %v: want a group of one to carry more than one parity", k, r, flow)
	}
	if !a.SetTickFill(0.5, false) {
		t.Fatal("a quiet tick after the flow: Partial unchanged")
	}
	if a.SetTickFill(0, false) {
		t.Fatal("a second quiet tick changed Partial again")
	}
	capped := a.Partial()
	if len(capped) != len(flow) {
		t.Fatalf("quiet table of %d entries, want %d", len(capped), len(flow))
	}
	for n := 1; n < len(capped); n++ {
		if want := min(int(flow[n]), n); int(capped[n]) != want {
			t.Fatalf("quiet: a group of %d closing early carries %d parity, want %d (flow's table %d)", n, capped[n], want, flow[n])
		}
	}
	if !a.Loud() || !slices.Equal(a.Partial(), flow) {
		t.Fatalf("a flow again: table %v, want the rule's %v", a.Partial(), flow)
	}

	g := freshAdapter(t) // the start-up guess: no table, every group its R
	_, gr := g.Ratio()
	if g.Partial() != nil || !g.SetTickFill(1, false) {
		t.Fatal("the guess: a table before any report, or a quiet tick changed nothing")
	}
	for n, c := range g.Partial() {
		if want := min(gr, max(n, 1)); int(c) != want {
			t.Fatalf("quiet under the guess %d parity: a group of %d carries %d, want %d", gr, n, c, want)
		}
	}
	if !g.SetTickFill(1, true) || g.Partial() != nil {
		t.Fatalf("the guess, a tick of a few large packets (a paced slow start): table %v, want none (full R)", g.Partial())
	}

	off := freshAdapter(t)
	off.SetFill(40)
	for range cleanReports {
		off.Observe(LossReport{Expected: 500, Received: 500})
	}
	if _, r := off.Ratio(); r != 0 || off.SetTickFill(0, false) {
		t.Fatalf("no parity (R %d): a quiet tick reported a change", r)
	}
}

// A flow after a quiet spell on a lane whose bursts the rule stopped
// assuming under a standing queue, without measuring them, starts under
// the start-up guess with the bursts assumed again; on a lane whose
// bursts were measured, Restart changes nothing.
func TestAdapterRestartAssumesBurstsAgain(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetRTT(50 * time.Millisecond)
	a.SetFill(90)
	a.SetPath(PathSplit)
	rep := LossReport{Expected: 20000, Received: 19000, Runs: 100}
	observeN(a, assumeReports+1, rep)
	if b, ok := a.Burst(); ok || b != 1 || a.Depth() != 1 {
		t.Fatalf("after %d split reports: burst %v (measured %v) at depth %d, want independent at depth 1", assumeReports+1, b, ok, a.Depth())
	}
	if a.Busy() {
		t.Fatal("a busy lane without a quiet spell got the guess")
	}
	if !a.Restart() || !a.guessing() || !a.assuming() {
		t.Fatalf("a flow after a quiet spell: guess %v, bursts assumed %v", a.guessing(), a.assuming())
	}
	a.SetPath(PathClear)
	a.Observe(rep)
	if a.Depth() == 1 {
		t.Fatal("the flow's first report at 5% loss: depth 1, want the assumed bursts' interleave")
	}

	m := mustAdapter(t)
	m.SetRTT(50 * time.Millisecond)
	m.SetFill(90)
	m.SetPath(PathSplit)
	observeN(m, assumeReports+1, rep) // the assumption ended
	m.SetPath(PathClear)
	observeN(m, 3, LossReport{Expected: 20000, Received: 19000, Runs: 980}) // independent, measured
	if _, ok := m.Burst(); !ok || m.assumed < assumeReports {
		t.Fatalf("independent loss not measured after the assumption ended (assumed %d)", m.assumed)
	}
	k, r := m.Ratio()
	if m.Restart() || m.Busy() || m.guessing() {
		t.Fatalf("measured bursts, a flow after a quiet spell: the guess replaced %d:%d", k, r)
	}
}
