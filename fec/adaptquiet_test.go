package fec

import (
	"testing"
	"time"
)

// A lane's tick is quiet under two data symbols per flush timeout with no
// large packet; a large packet (a paced slow start, a retransmission) or a
// flow (Loud) ends it. SetTickFill and Loud report the changes.
func TestAdapterQuietTicks(t *testing.T) {
	a := freshAdapter(t)
	if a.Quiet() || !a.SetTickFill(0.5, false) || !a.Quiet() {
		t.Fatal("a tick of a ping or two: not quiet, or no change reported")
	}
	if a.SetTickFill(0, false) {
		t.Fatal("a second quiet tick reported a change")
	}
	if !a.SetTickFill(1, true) || a.Quiet() {
		t.Fatal("a tick with a large packet is quiet")
	}
	a.SetTickFill(1, false)
	if !a.Loud() || a.Quiet() || a.Loud() {
		t.Fatal("Loud: still quiet, or a change reported twice")
	}
	if a.SetTickFill(sparseBelow, false) || a.Quiet() {
		t.Fatal("a tick at two symbols per flush timeout is quiet")
	}
}

// Under SetSmallCap a group of small symbols that closes early carries at
// most one parity symbol per data symbol, whatever R and the table say; a
// group of large symbols keeps them.
func TestEncoderSmallCap(t *testing.T) {
	now := time.Unix(0, 0)
	for _, c := range []struct {
		size int
		cap  bool
		want int
	}{{60, true, 1}, {60, false, 6}, {1200, true, 6}} {
		e, err := NewEncoder(EncoderConfig{K: 16, R: 6, FlushTimeout: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		e.SetSmallCap(c.cap)
		if _, err := e.Add(make([]byte, c.size), now); err != nil {
			t.Fatal(err)
		}
		e.Tick(now.Add(10 * time.Millisecond))
		n := 0
		for {
			if _, _, ok := e.NextParity(); !ok {
				break
			}
			n++
		}
		if n != c.want {
			t.Fatalf("a %d-byte packet alone, cap %v: %d parity, want %d", c.size, c.cap, n, c.want)
		}
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
