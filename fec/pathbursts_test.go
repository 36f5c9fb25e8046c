package fec

import (
	"testing"
	"time"
)

// A peer's record of its path's bursts gives the last noted, to a lane
// whose path began before it, for sharedBurstAge; nil records nothing.
func TestPathBurstsRecent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var nilRec *PathBursts
	nilRec.Note(2, false, t0)
	if _, _, ok := nilRec.Recent(t0, time.Time{}); ok {
		t.Fatal("a nil record gave a burst")
	}
	s := new(PathBursts)
	if _, _, ok := s.Recent(t0, time.Time{}); ok {
		t.Fatal("nothing noted: gave a burst")
	}
	s.Note(7.85, false, t0)
	s.Note(1.02, true, t0)                // the lane lowered its estimate: the record follows
	s.Note(0, false, t0.Add(time.Second)) // no estimate
	if b, bound, ok := s.Recent(t0.Add(sharedBurstAge), time.Time{}); !ok || b != 1.02 || !bound {
		t.Fatalf("noted 7.85, then a bound of 1.02: %v (bound %v) %v", b, bound, ok)
	}
	if _, _, ok := s.Recent(t0.Add(sharedBurstAge+time.Millisecond), time.Time{}); ok {
		t.Fatal("a burst older than sharedBurstAge given")
	}
	if _, _, ok := s.Recent(t0.Add(time.Second), t0.Add(time.Millisecond)); ok {
		t.Fatal("a burst noted before the asking lane's path began given")
	}
}

// A lane that has measured nothing predicts with the bursts another lane
// of its peer measured (at most unknownBurst): a flow's first report on a
// channel measured as losing 1% independently gets large groups at
// depth 1, not the assumed bursts' deep interleave. A measurement of its
// own stands against another's; a bound of its own caps what it borrows,
// and a borrowed bound only lowers.
func TestAdapterBorrowsBursts(t *testing.T) {
	first := LossReport{Expected: 3000, Received: 2970, Runs: 30}
	own := freshAdapter(t)
	own.SetFill(200)
	own.Observe(first)
	if !own.assuming() || own.Depth() != MaxDepth {
		t.Fatalf("nothing borrowed: depth %d, assuming %v; want the assumption, %d deep", own.Depth(), own.assuming(), MaxDepth)
	}
	a := freshAdapter(t)
	a.SetFill(200)
	a.Borrow(1.01, false)
	a.Observe(first)
	k, r := a.Ratio()
	if a.assuming() || a.Depth() != 1 || k < 64 {
		t.Fatalf("borrowed independent loss: %d:%d depth %d (assuming %v), want large groups at depth 1", k, r, a.Depth(), a.assuming())
	}
	if _, _, ok := a.Sampled(); ok {
		t.Fatal("a borrowed burst offered as sampled")
	}
	m := freshAdapter(t)
	m.burst = 3
	m.Borrow(1.01, false)
	if b, _ := m.Burst(); b != 3 {
		t.Fatalf("measured 3, borrowed 1.01: predicts with %v", b)
	}
	o := freshAdapter(t)
	if o.Borrow(7.85, false); o.burst != unknownBurst {
		t.Fatalf("nothing measured, borrowed 7.85: %v, want at most %v", o.burst, unknownBurst)
	}
	m.bound = true
	if m.Borrow(5, false); m.burst != 3 || m.bound {
		t.Fatalf("bound 3, borrowed 5 measured: %v (bound %v), want 3 as measured", m.burst, m.bound)
	}
	m.bound = true
	if m.Borrow(1.5, false); m.burst != 1.5 || m.bound {
		t.Fatalf("bound 3, borrowed 1.5 measured: %v (bound %v)", m.burst, m.bound)
	}
	// A borrowed bound only lowers: the assumption, or a bound.
	u := freshAdapter(t)
	if u.Borrow(7.85, true); !u.assuming() {
		t.Fatalf("assumed, borrowed a bound of 7.85: burst %v, want still assumed", u.burst)
	}
	if u.Borrow(1.02, true); u.burst != 1.02 || !u.bound {
		t.Fatalf("assumed, borrowed a bound of 1.02: burst %v (bound %v)", u.burst, u.bound)
	}
	if u.Borrow(3, true); u.burst != 1.02 {
		t.Fatalf("bound 1.02, borrowed a bound of 3: burst %v", u.burst)
	}
}

// Sampled offers what a clear report's runs measured, and what a bound
// lowered the estimate to, not a report that set nothing.
func TestAdapterSampled(t *testing.T) {
	a := freshAdapter(t)
	a.SetPath(PathClear)
	rep := LossReport{Expected: 10000, Received: 9900, Runs: 100}
	a.Observe(rep)
	if b, bound, ok := a.Sampled(); !ok || bound || b > burstyAbove {
		t.Fatalf("100 singletons judged clear: sampled %v (bound %v) %v, want independent loss measured", b, bound, ok)
	}
	a.burstSkip = 0 // the change of depth's skip aside: the report counts
	a.Observe(LossReport{Expected: 1000, Received: 995, Runs: 5})
	if _, _, ok := a.Sampled(); ok {
		t.Fatal("5 lost: offered a sample")
	}
	s := freshAdapter(t)
	s.SetPath(PathSplit)
	s.Observe(rep)
	if b, bound, ok := s.Sampled(); !ok || !bound || b > burstyAbove {
		t.Fatalf("a split report's singletons: offered %v (bound %v) %v, want a bound lowering the assumption", b, bound, ok)
	}
	s.burstSkip = 0
	s.Observe(LossReport{Expected: 10000, Received: 9900, Runs: 25})
	if b, _, ok := s.Sampled(); ok {
		t.Fatalf("a split report's runs above the bound: offered %v", b)
	}
}
