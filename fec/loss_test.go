// Tests of the loss report: its wire form, and what the Decoder counts into
// it (runs, groups without parity, groups that never arrive, late and
// wrapped ones), with the encoder's part in making a lost packet show.

package fec

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

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
		d.Push(w.m, w.b, t0, func([]byte, bool) bool { return true })
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
				d.Push(w.m, w.b, t0, func([]byte, bool) bool { return true })
			}
		}
	}
	// Slide the window past all four.
	for g := range 4 {
		_ = g
		b := payload(rng, 1000+uint64(g), 200)
		m, _ := e.Add(b, t0)
		d.Push(m, b, t0, func([]byte, bool) bool { return true })
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

// A group that never arrives at all (a single-packet group, as a ping or a
// lane without parity sends, lost whole) counts as one lost data symbol
// once it leaves the window, also when the window jumps past it; groups
// before the first one seen do not count.
func TestDecoderCountsUnseenGroups(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 8, MaxAhead: 32})
	ok := func([]byte, bool) bool { return true }
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
	ok := func([]byte, bool) bool { return true }
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
	ok := func([]byte, bool) bool { return true }
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
