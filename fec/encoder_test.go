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
