// Tests of the Decoder's recovery: every loss pattern of a group (all of
// them for small groups, random ones for large), reordering across groups,
// the flush timeout, and symbols that are invalid or contradict their group.

package fec

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// patternHarness keeps one encoder/decoder pair per K:R so each loss pattern
// is just the next group on the lane, as in real use.
type patternHarness struct {
	k, r int
	e    *Encoder
	d    *Decoder
}

func newHarness(rng *rand.Rand, k, r int) *patternHarness {
	e, _ := NewEncoder(EncoderConfig{K: k, R: r, FirstGroup: rng.Uint32()})
	return &patternHarness{k: k, r: r, e: e, d: NewDecoder(DecoderConfig{})}
}

// check sends one group of n data symbols (n<K means a flushed partial
// group), delivers the symbols selected by mask in order or shuffled (with
// optional duplicates), and checks that every data symbol comes out exactly
// once, byte-exact, iff at least n of the n+R symbols arrived; otherwise
// exactly the received data symbols come out.
func (h *patternHarness) check(t *testing.T, rng *rand.Rand, n int, mask indexSet, shuffle, dup bool) {
	t.Helper()
	k, r, d := h.k, h.r, h.d
	s := newSink(t)
	syms := make([][]byte, n)
	for i := range syms {
		// One size class (encoder.go), so the n symbols make one group.
		syms[i] = payload(rng, uint64(i), 8+rng.IntN(classMax[0]-8))
		s.expect(syms[i])
	}
	wire := emitGroup(t, h.e, syms, t0)
	if len(wire) != n+r {
		t.Fatalf("%d:%d n=%d: %d wire symbols", k, r, n, len(wire))
	}
	var got []wireSym
	for i, w := range wire {
		if mask.has(i) {
			got = append(got, w)
			if dup {
				got = append(got, w)
			}
		}
	}
	if shuffle {
		rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	}
	before := d.Stats()
	for _, w := range got {
		d.Push(w.m, w.b, t0, s.deliver)
	}
	arrived := mask.count()
	for i, sym := range syms {
		want := arrived >= n || mask.has(i)
		if s.has(sym) != want {
			t.Fatalf("%d:%d n=%d mask=%b: data %d delivered=%v, want %v (arrived %d)",
				k, r, n, mask, i, s.has(sym), want, arrived)
		}
	}
	st := d.Stats()
	out := st.Delivered + st.Recovered - before.Delivered - before.Recovered
	if arrived >= n && out != uint64(n) {
		t.Fatalf("%d:%d mask=%b: delivered+recovered=%d, want %d", k, r, mask, out, n)
	}
	if d.StoredBytes() > d.CapBytes() {
		t.Fatalf("stored %d over cap %d", d.StoredBytes(), d.CapBytes())
	}
}

// TestLossPatternsExhaustive tries every subset of arriving symbols for all
// K:R with K+R ≤ 10, for full groups and for one flushed partial group.
func TestLossPatternsExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	maxN := 10
	if testing.Short() {
		maxN = 7
	}
	for k := 1; k < maxN; k++ {
		for r := 1; k+r <= maxN; r++ {
			h := newHarness(rng, k, r)
			for _, n := range []int{k, (k + 1) / 2} {
				for m := uint64(0); m < 1<<(n+r); m++ {
					h.check(t, rng, n, indexSet{m}, m%3 == 0, m%5 == 0)
				}
			}
		}
	}
}

// TestLossPatternsRandom covers the larger ratios with random patterns.
func TestLossPatternsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	iters := 150
	if testing.Short() {
		iters = 30
	}
	for _, kr := range [][2]int{{8, 2}, {16, 2}, {16, 4}, {32, 8}, {LegacyMaxK, LegacyMaxR}, {128, 40}, {MaxK, MaxR}} {
		k, r := kr[0], kr[1]
		h := newHarness(rng, k, r)
		for it := range iters {
			n := k
			if it%4 == 3 {
				n = 1 + rng.IntN(k)
			}
			// Bias towards the interesting boundary: about n arrivals.
			lost := max(0, r-2+rng.IntN(5))
			perm := rng.Perm(n + r)
			var mask indexSet
			for i := range n + r {
				mask.add(i)
			}
			for _, i := range perm[:min(lost, n+r)] {
				mask.remove(i)
			}
			h.check(t, rng, n, mask, it%2 == 0, it%3 == 0)
		}
	}
}

// TestReorderAcrossGroups interleaves many groups of mixed size classes with
// shuffling, duplicates and losses; every data symbol of a group with ≥K
// arrivals must come out once.
func TestReorderAcrossGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	e, _ := NewEncoder(EncoderConfig{K: 6, R: 2, FirstGroup: 0xFFFFFFF0})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	var wire []wireSym
	var syms [][]byte
	for i := range 6 * 40 {
		b := payload(rng, uint64(i), 20+rng.IntN(1400))
		s.expect(b)
		syms = append(syms, b)
		m, _ := e.Add(b, t0)
		wire = append(wire, wireSym{m, b})
		wire = drainParity(e, wire)
	}
	e.Flush()
	wire = drainParity(e, wire)
	// Lose up to 2 per group (always recoverable), duplicate 10%.
	lost := map[uint32]int{}
	var got []wireSym
	for _, w := range wire {
		if lost[w.m.Group] < 2 && rng.IntN(4) == 0 {
			lost[w.m.Group]++
			continue
		}
		got = append(got, w)
		if rng.IntN(10) == 0 {
			got = append(got, w)
		}
	}
	// Displace each symbol by up to ±20 positions (≈ 3 groups): with the
	// classes' groups up to maxSpan apart, the default window covers it.
	keys := make([]int, len(got))
	for i := range keys {
		keys[i] = i + rng.IntN(20)
	}
	sort.Sort(byKey{keys, got})
	for _, w := range got {
		d.Push(w.m, w.b, t0, s.deliver)
	}
	for i, b := range syms {
		if !s.has(b) {
			t.Fatalf("symbol %d never delivered (stats %+v)", i, d.Stats())
		}
	}
	st := d.Stats()
	if st.Duplicates == 0 || st.Recovered == 0 || st.Late != 0 {
		t.Fatalf("stats %+v: expected duplicates and recoveries, no late drops", st)
	}
}

type byKey struct {
	k []int
	w []wireSym
}

func (b byKey) Len() int           { return len(b.k) }
func (b byKey) Less(i, j int) bool { return b.k[i] < b.k[j] }
func (b byKey) Swap(i, j int) {
	b.k[i], b.k[j] = b.k[j], b.k[i]
	b.w[i], b.w[j] = b.w[j], b.w[i]
}

// TestFlushTimeoutRecovery: a lone packet on an idle lane is protected by the
// flush-timeout parity.
func TestFlushTimeoutRecovery(t *testing.T) {
	e, _ := NewEncoder(EncoderConfig{K: 16, R: 1, FlushTimeout: 2 * time.Millisecond})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	b := payload(rand.New(rand.NewPCG(9, 9)), 42, 1200)
	s.expect(b)
	e.Add(b, t0) // lost on the wire
	if !e.Tick(t0.Add(2 * time.Millisecond)) {
		t.Fatal("no parity after flush timeout")
	}
	m, p, _ := e.NextParity()
	d.Push(m, p, t0.Add(3*time.Millisecond), s.deliver)
	if !s.has(b) {
		t.Fatal("lost packet not recovered from flush parity")
	}
}

// TestInvalidMeta: impossible headers are counted and never delivered.
func TestInvalidMeta(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	bad := []struct {
		m Meta
		n int
	}{
		{Meta{KindData, 1, 4, 4, 1}, 10},        // index ≥ K
		{Meta{KindData, 1, 0, 0, 1}, 10},        // K = 0
		{Meta{KindData, 1, 0, MaxK + 1, 1}, 10}, // K too big
		{Meta{KindData, 1, 0, 4, MaxR + 1}, 10}, // R too big
		{Meta{KindData, 1, 0, 4, 1}, 0},         // empty
		{Meta{KindData, 1, 0, 4, 1}, MaxSymbolLen + 1},
		{Meta{KindParity, 1, 3, 4, 1}, 10}, // parity index < K
		{Meta{KindParity, 1, 5, 4, 1}, 10}, // parity index ≥ K+R
		{Meta{KindParity, 1, 4, 4, 0}, 10}, // parity with R=0
		{Meta{KindParity, 1, 4, 4, 1}, 2},  // no room for a length
		{Meta{KindParity, 1, 4, 4, 1}, MaxParityLen + 1},
		{Meta{Kind(2), 1, 0, 4, 1}, 10}, // control never reaches FEC
	}
	for _, b := range bad {
		d.Push(b.m, make([]byte, b.n), t0, func([]byte, bool) bool { t.Fatalf("delivered invalid %+v", b.m); return false })
	}
	if st := d.Stats(); st.Invalid != uint64(len(bad)) || d.StoredBytes() != 0 {
		t.Fatalf("stats %+v stored %d", st, d.StoredBytes())
	}
}

// TestInconsistentGroup: parity contradicting the data seen (a broken peer)
// stops recovery for that group but never blocks pass-through.
func TestInconsistentGroup(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	n := 0
	count := func([]byte, bool) bool { n++; return true }
	d.Push(Meta{KindData, 7, 3, 8, 2}, []byte("abcd"), t0, count)
	// Parity claims K=2, but index 3 was already seen as data.
	d.Push(Meta{KindParity, 7, 2, 2, 2}, []byte("xxxxxx"), t0, count)
	d.Push(Meta{KindData, 7, 0, 8, 2}, []byte("ok"), t0, count)
	st := d.Stats()
	if st.Inconsistent == 0 || n != 2 || st.Recovered != 0 {
		t.Fatalf("stats %+v delivered %d", st, n)
	}
	// Data longer than the group's parity allows.
	d.Push(Meta{KindParity, 8, 2, 2, 1}, []byte("xxx"), t0, count)
	d.Push(Meta{KindData, 8, 0, 2, 1}, []byte("toolong"), t0, count)
	if d.Stats().Inconsistent != st.Inconsistent+1 || n != 3 {
		t.Fatalf("long data: %+v", d.Stats())
	}
}
