package fec

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestEncoderNumbering(t *testing.T) {
	// Two full groups of 3 data + 2 parity, across the group id wrap.
	e2, err := NewEncoder(EncoderConfig{K: 3, R: 2, FirstGroup: 0xFFFFFFFF})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var wire []wireSym
	for g := range 2 {
		var syms [][]byte
		for i := range 3 {
			syms = append(syms, payload(rng, uint64(g*3+i), 50+100*i))
		}
		wire = append(wire, emitGroup(t, e2, syms, t0)...)
	}
	want := []Meta{
		{KindData, 0xFFFFFFFF, 0, 3, 2}, {KindData, 0xFFFFFFFF, 1, 3, 2}, {KindData, 0xFFFFFFFF, 2, 3, 2},
		{KindParity, 0xFFFFFFFF, 3, 3, 2}, {KindParity, 0xFFFFFFFF, 4, 3, 2},
		{KindData, 0, 0, 3, 2}, {KindData, 0, 1, 3, 2}, {KindData, 0, 2, 3, 2},
		{KindParity, 0, 3, 3, 2}, {KindParity, 0, 4, 3, 2},
	}
	if len(wire) != len(want) {
		t.Fatalf("got %d symbols, want %d", len(wire), len(want))
	}
	for i, w := range wire {
		if w.m != want[i] {
			t.Errorf("symbol %d: meta %+v, want %+v", i, w.m, want[i])
		}
	}
	// Parity is 2 + the group's longest data symbol (250 bytes).
	if got := len(wire[3].b); got != 2+250 {
		t.Errorf("parity length %d, want %d", got, 252)
	}
}

func TestEncoderSetRatioNextGroup(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 4, R: 1})
	m, _ := e.Add([]byte("hello"), t0)
	if err := e.SetRatio(2, 2); err != nil {
		t.Fatal(err)
	}
	if m2, _ := e.Add([]byte("world"), t0); m2.K != 4 || m2.R != 1 || m.K != 4 {
		t.Fatalf("ratio changed mid-group: %+v", m2)
	}
	if !e.Flush() {
		t.Fatal("flush of a partial group produced no parity")
	}
	pm, _, _ := e.NextParity()
	if pm != (Meta{KindParity, 0, 2, 2, 1}) {
		t.Fatalf("partial-group parity meta %+v, want actual K=2 R=1", pm)
	}
	if _, _, ok := e.NextParity(); ok {
		t.Fatal("R=1 group produced a second parity symbol")
	}
	m3, _ := e.Add([]byte("again"), t0)
	if m3 != (Meta{KindData, 1, 0, 2, 2}) {
		t.Fatalf("next group meta %+v, want group 1 at 2:2", m3)
	}
	if err := e.SetRatio(0, 1); err != ErrRatio {
		t.Fatalf("SetRatio(0,1) = %v, want ErrRatio", err)
	}
	if err := e.SetRatio(MaxK, MaxR+1); err != ErrRatio {
		t.Fatalf("SetRatio over MaxR = %v, want ErrRatio", err)
	}
}

func TestEncoderFlushTimeout(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 8, R: 2, FlushTimeout: 3 * time.Millisecond})
	if _, ok := e.Deadline(); ok {
		t.Fatal("deadline with no open group")
	}
	e.Add([]byte("one"), t0)
	e.Add([]byte("two!"), t0.Add(time.Millisecond))
	d, ok := e.Deadline()
	if !ok || !d.Equal(t0.Add(3*time.Millisecond)) {
		t.Fatalf("deadline %v %v, want first symbol + 3ms", d, ok)
	}
	if e.Tick(t0.Add(2 * time.Millisecond)) {
		t.Fatal("flushed before the timeout")
	}
	if !e.Tick(t0.Add(3 * time.Millisecond)) {
		t.Fatal("no parity at the flush timeout")
	}
	n := 0
	for {
		m, p, ok := e.NextParity()
		if !ok {
			break
		}
		if m.K != 2 || m.R != 2 || len(p) != 2+4 {
			t.Fatalf("parity %+v len %d", m, len(p))
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d parity symbols, want 2", n)
	}
	if m, _ := e.Add([]byte("x"), t0.Add(4*time.Millisecond)); m.Group != 1 || m.Index != 0 {
		t.Fatalf("after flush, meta %+v, want group 1 index 0", m)
	}
}

func TestEncoderOffAndLimits(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 2, R: 0})
	for i := range 5 {
		m, err := e.Add([]byte{byte(i)}, t0)
		if err != nil || m.R != 0 || m.Group != uint32(i/2) {
			t.Fatalf("off mode symbol %d: %+v %v", i, m, err)
		}
		if _, _, ok := e.NextParity(); ok {
			t.Fatal("parity with R=0")
		}
	}
	if e.Flush() || e.Tick(t0.Add(time.Hour)) {
		t.Fatal("R=0 flush produced parity")
	}
	if _, err := e.Add(nil, t0); err != ErrSymbolLen {
		t.Fatalf("empty symbol: %v", err)
	}
	if _, err := e.Add(make([]byte, MaxSymbolLen+1), t0); err != ErrSymbolLen {
		t.Fatalf("oversize symbol: %v", err)
	}
	if _, err := NewEncoder(EncoderConfig{K: MaxK + 1, R: 1}); err != ErrRatio {
		t.Fatalf("K over MaxK: %v", err)
	}
}

func TestEncoderDroppedParity(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 1, R: 2})
	e.Add([]byte("a"), t0)
	e.Add([]byte("b"), t0) // parity of the first group never drained
	if e.DroppedParity() != 2 {
		t.Fatalf("DroppedParity = %d, want 2", e.DroppedParity())
	}
}

// TestEncoderRatioChanges: parity stays correct when R shrinks and grows
// again between groups (stale parity bytes in reused slabs would break it).
func TestEncoderRatioChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	e, _ := NewEncoder(EncoderConfig{K: 3, R: 3})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	seq := uint64(0)
	for _, kr := range [][2]int{{3, 3}, {3, 1}, {5, 3}, {2, 2}, {4, 4}, {4, 1}, {6, 5}} {
		if err := e.SetRatio(kr[0], kr[1]); err != nil {
			t.Fatal(err)
		}
		var syms [][]byte
		for range kr[0] {
			b := payload(rng, seq, 10+rng.IntN(900))
			seq++
			s.expect(b)
			syms = append(syms, b)
		}
		wire := emitGroup(t, e, syms, t0)
		lose := min(kr[0], kr[1]) // as many data symbols as parity can cover
		for _, w := range wire[lose:] {
			d.Push(w.m, w.b, t0, s.deliver)
		}
		for i, b := range syms {
			if !s.has(b) {
				t.Fatalf("%d:%d: data %d not recovered", kr[0], kr[1], i)
			}
		}
	}
}

// TestEncoderSizeClasses: small and full-size symbols interleaved on one
// lane go into groups of their own, so a small group's parity is small;
// group ids stay distinct, and the decoder recovers a loss in each.
func TestEncoderSizeClasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	e, _ := NewEncoder(EncoderConfig{K: 4, R: 1})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	var wire []wireSym
	for i := range 8 {
		n := 64
		if i%2 == 1 {
			n = 1424
		}
		b := payload(rng, uint64(i), n)
		s.expect(b)
		m, _ := e.Add(b, t0)
		wire = drainParity(e, append(wire, wireSym{m, b}))
	}
	groups := map[uint32][]int{}
	for i, w := range wire {
		groups[w.m.Group] = append(groups[w.m.Group], i)
		if w.m.Kind == KindParity {
			want := 2 + 64
			if w.m.Group != wire[0].m.Group {
				want = 2 + 1424
			}
			if len(w.b) != want {
				t.Errorf("parity of group %d: %d bytes, want %d", w.m.Group, len(w.b), want)
			}
		}
	}
	if len(groups) != 2 || len(wire) != 10 {
		t.Fatalf("%d groups, %d symbols on the wire; want 2 groups of 4+1", len(groups), len(wire))
	}
	// Lose the first data symbol of each group.
	for _, idx := range groups {
		for _, i := range idx[1:] {
			d.Push(wire[i].m, wire[i].b, t0, s.deliver)
		}
	}
	s.all()
}

// TestEncoderSpanClosesSlowClass: a class whose group would fall out of the
// peer's decoder window behind a faster class is closed after maxSpan newer
// groups, with its parity, so its lost packet is still recovered.
func TestEncoderSpanClosesSlowClass(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	e, _ := NewEncoder(EncoderConfig{K: 2, R: 1})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	small := payload(rng, 0, 80)
	s.expect(small)
	sm, _ := e.Add(small, t0) // lost on the wire
	var wire []wireSym
	for i := range 2 * (maxSpan + 4) {
		b := payload(rng, uint64(i+1), 1400)
		s.expect(b)
		m, _ := e.Add(b, t0)
		wire = drainParity(e, append(wire, wireSym{m, b}))
	}
	var par []wireSym
	for _, w := range wire {
		if w.m.Group == sm.Group {
			par = append(par, w)
		}
	}
	if len(par) != 1 || par[0].m != (Meta{KindParity, sm.Group, 1, 1, 1}) {
		t.Fatalf("slow class's parity %+v, want one 1:1 parity", par)
	}
	newest := sm.Group
	for _, w := range wire {
		if w.m == par[0].m && newest-sm.Group > maxSpan {
			t.Fatalf("slow group closed after %d newer groups, want ≤ %d", newest-sm.Group, maxSpan)
		}
		newest = max(newest, w.m.Group)
		d.Push(w.m, w.b, t0, s.deliver)
	}
	s.all()
	if st := d.Stats(); st.Late != 0 {
		t.Fatalf("late symbols: %+v", st)
	}
}

// TestEncoderPartialParity: a group that closes early carries the parity
// count the table gives for its size (at most R), and that parity still
// recovers as many losses as it has symbols; a full group keeps R.
func TestEncoderPartialParity(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	e, _ := NewEncoder(EncoderConfig{K: 8, R: 4})
	e.SetPartialParity([]uint8{0, 1, 2, 9})
	for _, tc := range []struct{ n, want int }{{1, 1}, {2, 2}, {3, 4}, {5, 4}, {8, 4}} {
		d := NewDecoder(DecoderConfig{})
		s := newSink(t)
		var syms [][]byte
		for i := range tc.n {
			b := payload(rng, uint64(i), 1000+i)
			s.expect(b)
			syms = append(syms, b)
		}
		wire := emitGroup(t, e, syms, t0)
		if got := len(wire) - tc.n; got != tc.want || wire[len(wire)-1].m.R != uint8(tc.want) {
			t.Fatalf("group of %d: %d parity (last %+v), want %d", tc.n, got, wire[len(wire)-1].m, tc.want)
		}
		lose := min(tc.n, tc.want)
		for _, w := range wire[lose:] {
			d.Push(w.m, w.b, t0, s.deliver)
		}
		s.all()
	}
	e.SetPartialParity(nil)
	if wire := emitGroup(t, e, [][]byte{payload(rng, 0, 100)}, t0); len(wire) != 1+4 {
		t.Fatalf("without a table a flushed group of 1 has %d parity, want R=4", len(wire)-1)
	}
}

// TestEncoderDepth: at depth 2 a class's symbols alternate between two
// groups and their parity goes out row by row across them, so a burst of
// 2R consecutive symbols costs each group only R and is recovered, where
// one group of the same K:R would lose it.
func TestEncoderDepth(t *testing.T) {
	const k, r = 4, 2
	rng := rand.New(rand.NewPCG(27, 28))
	for _, depth := range []int{1, 2} {
		e, _ := NewEncoder(EncoderConfig{K: k, R: r, FirstGroup: 100})
		e.SetDepth(depth)
		d := NewDecoder(DecoderConfig{})
		s := newSink(t)
		var wire []wireSym
		for i := range k * depth {
			b := payload(rng, uint64(i), 1200)
			s.expect(b)
			m, _ := e.Add(b, t0)
			if want := uint32(100 + i%depth); m.Group != want || int(m.Index) != i/depth {
				t.Fatalf("depth %d: symbol %d in group %d index %d, want %d %d", depth, i, m.Group, m.Index, want, i/depth)
			}
			wire = drainParity(e, append(wire, wireSym{m, b}))
		}
		if len(wire) != (k+r)*depth {
			t.Fatalf("depth %d: %d symbols on the wire", depth, len(wire))
		}
		for i, w := range wire[k*depth:] {
			if want := uint32(100 + i%depth); w.m.Kind != KindParity || w.m.Group != want || int(w.m.Index) != k+i/depth {
				t.Fatalf("depth %d: parity %d is %+v, want group %d row %d", depth, i, w.m, want, i/depth)
			}
		}
		// A burst of 2R consecutive data symbols.
		for _, w := range wire[2*r:] {
			d.Push(w.m, w.b, t0, s.deliver)
		}
		got := 0
		for _, b := range s.sent {
			if s.has(b) {
				got++
			}
		}
		if want := map[int]int{1: k - 2*r, 2: k * depth}[depth]; got != want {
			t.Fatalf("depth %d: %d of %d delivered after a burst of %d, want %d", depth, got, k*depth, 2*r, want)
		}
	}
	// A flushed block: groups keep what they got; a class with fewer
	// symbols than the depth uses only as many groups.
	e, _ := NewEncoder(EncoderConfig{K: 8, R: 1})
	e.SetDepth(4)
	var wire []wireSym
	for i := range 6 {
		m, _ := e.Add(payload(rng, uint64(i), 100), t0)
		wire = append(wire, wireSym{m, nil})
	}
	e.Flush()
	wire = drainParity(e, wire)
	want := []Meta{{KindParity, 0, 2, 2, 1}, {KindParity, 1, 2, 2, 1}, {KindParity, 2, 1, 1, 1}, {KindParity, 3, 1, 1, 1}}
	for i, w := range wire[6:] {
		if i >= len(want) || w.m != want[i] {
			t.Fatalf("flushed block's parity %d: %+v, want %+v", i, w.m, want)
		}
	}
	if len(wire) != 6+len(want) {
		t.Fatalf("%d parity, want %d", len(wire)-6, len(want))
	}
}
