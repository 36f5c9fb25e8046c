package fec

import (
	"math/rand/v2"
	"runtime"
	"slices"
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

// TestWindowBounds: far-ahead and late symbols are dropped and counted, the
// window slides, expired groups free storage, and a late original after
// expiry is delivered once and never twice.
func TestWindowBounds(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 8, GroupTTL: 100 * time.Millisecond})
	var n int
	count := func([]byte) bool { n++; return true }
	data := func(g uint32, i uint8) Meta { return Meta{KindData, g, i, 4, 2} }

	d.Push(data(100, 0), []byte("a"), t0, count)
	d.Push(data(100+9, 0), []byte("b"), t0, count) // beyond MaxAhead=8
	if st := d.Stats(); st.FarAhead != 1 || n != 1 {
		t.Fatalf("far ahead: %+v delivered %d", st, n)
	}
	d.Push(data(108, 0), []byte("c"), t0, count) // slides to 108; 100 falls out
	d.Push(data(100, 1), []byte("d"), t0, count)
	if st := d.Stats(); st.Late != 1 || n != 2 {
		t.Fatalf("late: %+v delivered %d", st, n)
	}
	if d.StoredBytes() > 2*slabLen {
		t.Fatalf("stored %d bytes for 2 held symbols", d.StoredBytes())
	}
	// Group 108 (K=4 per its parity) expires with 2 data missing: its
	// storage returns to the free list and the loss is counted; so are
	// groups 101..107, which never arrived (one data symbol each, at
	// least).
	d.Push(data(108, 1), []byte("e"), t0, count)
	d.Push(Meta{KindParity, 108, 4, 4, 2}, []byte("pp"+"x"), t0, count)
	d.Tick(t0.Add(100 * time.Millisecond))
	if st := d.Stats(); st.Expired != 1 || st.Unrecoverable != 1+7 || st.LostData != 2+7 {
		t.Fatalf("expiry: %+v", st)
	}
	if len(d.free) != len(d.arena) {
		t.Fatalf("expired group still holds storage: %d free of %d", len(d.free), len(d.arena))
	}
	// A late original of the expired (but in-window) group: delivered once.
	d.Push(data(108, 2), []byte("f"), t0.Add(101*time.Millisecond), count)
	d.Push(data(108, 2), []byte("f"), t0.Add(101*time.Millisecond), count)
	if n != 4 {
		t.Fatalf("delivered %d, want 4", n)
	}
	// After an idle TTL the window resynchronises to a far group.
	d.Push(data(5000, 0), []byte("g"), t0.Add(time.Second), count)
	if st := d.Stats(); st.Resyncs != 1 || n != 5 {
		t.Fatalf("resync: %+v delivered %d", st, n)
	}
}

// TestResyncOnlyForwards: after an idle GroupTTL a symbol from a group
// behind the window (a replayed old datagram) must not move the window back,
// or every genuine group after it would be dropped as far ahead — and
// re-sending it every 200 ms would keep the lane dead. Group ids wrap, so
// "behind" is serial-number arithmetic: the lane below runs across 2^32.
func TestResyncOnlyForwards(t *testing.T) {
	d := NewDecoder(DecoderConfig{}) // 32 groups, 250 ms TTL
	var got []string
	deliver := func(b []byte) bool { got = append(got, string(b)); return true }
	data := func(g uint32) Meta { return Meta{KindData, g, 0, 1, 0} }
	const first = ^uint32(0) - 40 // the lane's groups cross the wrap
	now := t0
	g := first
	for range 80 {
		d.Push(data(g), []byte("genuine"), now, deliver)
		g++
		now = now.Add(time.Millisecond)
	}
	if len(got) != 80 {
		t.Fatalf("delivered %d of 80 genuine symbols", len(got))
	}
	// Silence, then an attacker re-sends a datagram from 70 groups ago
	// (before the wrap) every 200 ms, between genuine traffic.
	now = now.Add(300 * time.Millisecond)
	for round := range 4 {
		got = got[:0]
		d.Push(data(first+10), []byte("replayed"), now, deliver)
		for range 10 {
			now = now.Add(time.Millisecond)
			d.Push(data(g), []byte("genuine"), now, deliver)
			g++
		}
		if len(got) != 10 || slices.Contains(got, "replayed") {
			t.Fatalf("round %d: delivered %q, want 10 genuine symbols", round, got)
		}
		now = now.Add(200 * time.Millisecond)
	}
	if st := d.Stats(); st.Resyncs != 0 || st.Late != 4 {
		t.Fatalf("old groups moved the window: %+v", st)
	}
	// A restarted sender far ahead still resynchronises the window.
	got = got[:0]
	now = now.Add(300 * time.Millisecond)
	d.Push(data(g+1000), []byte("genuine"), now, deliver)
	if st := d.Stats(); st.Resyncs != 1 || len(got) != 1 {
		t.Fatalf("forward resync: %+v delivered %d", st, len(got))
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
		d.Push(b.m, make([]byte, b.n), t0, func([]byte) bool { t.Fatalf("delivered invalid %+v", b.m); return false })
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
	count := func([]byte) bool { n++; return true }
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

// TestAdversarialMemoryCap floods the decoder with random but well-formed
// symbols (what a broken peer behind a valid tag could send) and checks the
// storage never exceeds the cap and the heap does not grow with the input.
func TestAdversarialMemoryCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const capBytes = 256 << 10
	d := NewDecoder(DecoderConfig{MaxGroups: 64, MaxBytes: capBytes, MaxAhead: 1 << 20})
	sym := make([]byte, MaxParityLen)
	for i := range sym {
		sym[i] = byte(rng.Uint32())
	}
	iters := 200000
	if testing.Short() {
		iters = 40000
	}
	now := t0
	peak := 0
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := uint32(0)
	for i := range iters {
		// Mostly plausible groups (stable K:R per group id, so symbols pile
		// up instead of being rejected as inconsistent) around a slowly
		// advancing head, some wild ones.
		g := base + rng.Uint32N(80)
		k, r := 1+int(g*2654435761>>26)%MaxK, 1+int(g*40503>>11)%MaxR
		if rng.IntN(8) == 0 {
			g = rng.Uint32()
			k, r = 1+rng.IntN(MaxK), 1+rng.IntN(MaxR)
		}
		m := Meta{Group: g, K: uint8(k), R: uint8(r)}
		n := 1 + rng.IntN(MaxSymbolLen)
		if rng.IntN(3) == 0 {
			m.Kind = KindParity
			m.Index = uint8(k + rng.IntN(r))
			n = MaxParityLen - int(g%3)
		} else {
			m.Index = uint8(rng.IntN(k))
		}
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
			d.Tick(now)
			base += 8
		}
		d.Push(m, sym[:n], now, func([]byte) bool { return true })
		peak = max(peak, d.StoredBytes())
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > int64(d.CapBytes())+1<<20 {
		t.Fatalf("heap grew %d bytes, cap is %d", grew, d.CapBytes())
	}
	if st := d.Stats(); st.Evicted == 0 || peak < d.CapBytes()/2 {
		t.Fatalf("flood did not reach the cap (peak %d, stats %+v): test is not testing", peak, st)
	}
	if peak > d.CapBytes() || d.CapBytes() > capBytes+(MaxK+MaxR)*slabLen {
		t.Fatalf("storage peak %d over cap %d", peak, d.CapBytes())
	}
	if len(d.free)+storedSlabs(d) != len(d.arena) {
		t.Fatalf("slab leak: %d free + %d held != %d", len(d.free), storedSlabs(d), len(d.arena))
	}
	t.Logf("peak storage %d of cap %d; stats %+v", peak, d.CapBytes(), d.Stats())
}

func storedSlabs(d *Decoder) int {
	n := 0
	for i := range d.slots {
		if d.slots[i].state == stateFree {
			continue
		}
		for _, b := range d.slots[i].bufs {
			if b >= 0 {
				n++
			}
		}
	}
	return n
}

// TestNoRedeliveryOfUnstored: a data symbol delivered but not kept for
// recovery (here: announced with R=0 by a confused peer) is rebuilt as a
// by-product when the group is recovered, and must not come out again.
func TestNoRedeliveryOfUnstored(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	e, _ := NewEncoder(EncoderConfig{K: 2, R: 2})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	syms := [][]byte{payload(rng, 0, 100), payload(rng, 1, 200)}
	for _, b := range syms {
		s.expect(b)
	}
	wire := emitGroup(t, e, syms, t0)
	m0 := wire[0].m
	m0.R = 0
	d.Push(m0, wire[0].b, t0, s.deliver) // delivered, not stored
	d.Push(wire[2].m, wire[2].b, t0, s.deliver)
	d.Push(wire[3].m, wire[3].b, t0, s.deliver) // recovers 0 (again) and 1
	if !s.has(syms[1]) || d.Stats().Recovered != 1 {
		t.Fatalf("stats %+v", d.Stats())
	}
}

// Head follows the newest group the window accepted, and only that: a
// group refused as far ahead or late leaves it where it was.
func TestHead(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 4})
	if _, ok := d.Head(); ok {
		t.Fatal("head before the first symbol")
	}
	nop := func([]byte) bool { return true }
	for _, c := range []struct {
		group, want uint32
	}{{7, 7}, {9, 9}, {8, 9}, {100, 9}, {0xFFFFFFF0, 9}, {12, 12}} {
		d.Push(Meta{Kind: KindData, Group: c.group, K: 1, R: 0}, []byte{1}, t0, nop)
		if h, ok := d.Head(); !ok || h != c.want {
			t.Fatalf("after group %d: head %d, %v; want %d", c.group, h, ok, c.want)
		}
	}
}

// Trim gives back the arena and solver of a decoder with nothing stored,
// never while a group holds symbols, and the decoder recovers as before
// afterwards.
func TestTrimReleasesIdleMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	e, _ := NewEncoder(EncoderConfig{K: 4, R: 2})
	d := NewDecoder(DecoderConfig{})
	s := newSink(t)
	group := func(now time.Time, lose ...int) [][]byte {
		syms := make([][]byte, 4)
		for i := range syms {
			syms[i] = payload(rng, rng.Uint64(), 1000)
			s.expect(syms[i])
		}
		wire := emitGroup(t, e, syms, now)
		for i, w := range wire {
			if !slices.Contains(lose, i) {
				d.Push(w.m, w.b, now, s.deliver)
			}
		}
		return syms
	}
	for _, b := range group(t0, 1, 2) { // recovered: slabs and a codec used
		if !s.has(b) {
			t.Fatal("not recovered")
		}
	}
	if d.StoredBytes() == 0 || d.er == nil {
		t.Fatalf("nothing held after a recovery: %d bytes, solver %v", d.StoredBytes(), d.er != nil)
	}
	// An open group holding symbols (its parity lost) blocks the trim.
	group(t0.Add(time.Millisecond), 4, 5, 3)
	if d.Trim() {
		t.Fatal("trimmed while a group holds symbols")
	}
	d.Tick(t0.Add(time.Second)) // the group expires
	if !d.Trim() || d.StoredBytes() != 0 || d.er != nil {
		t.Fatalf("after expiry: %d bytes held, solver %v", d.StoredBytes(), d.er != nil)
	}
	if d.Trim() {
		t.Fatal("a second trim released something")
	}
	later := t0.Add(2 * time.Second)
	for _, b := range group(later, 0, 3) {
		if !s.has(b) {
			t.Fatal("not recovered after the trim")
		}
	}
}

// Tick expires each group at its own deadline, whatever order groups were
// opened and finished in, and reports when it closed one.
func TestTickExpiresEachGroupOnTime(t *testing.T) {
	d := NewDecoder(DecoderConfig{GroupTTL: 100 * time.Millisecond})
	push := func(g uint32, at time.Duration) {
		d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 4, R: 1}, []byte("x"), t0.Add(at), func([]byte) bool { return true })
	}
	push(1, 0)
	push(2, 30*time.Millisecond)
	push(3, 60*time.Millisecond)
	for _, tc := range []struct {
		at      time.Duration
		closed  bool
		expired uint64
	}{
		{50 * time.Millisecond, false, 0},
		{99 * time.Millisecond, false, 0},
		{100 * time.Millisecond, true, 1},
		{129 * time.Millisecond, false, 1},
		{130 * time.Millisecond, true, 2},
		{161 * time.Millisecond, true, 3},
		{500 * time.Millisecond, false, 3},
	} {
		if got := d.Tick(t0.Add(tc.at)); got != tc.closed || d.Stats().Expired != tc.expired {
			t.Fatalf("at %s: closed %v expired %d, want %v %d", tc.at, got, d.Stats().Expired, tc.closed, tc.expired)
		}
	}
}
