// Tests of the Decoder's memory: the byte cap holds against a hostile
// peer, a symbol not stored under it is still delivered once and only once,
// and an idle decoder gives its arena back.

package fec

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
)

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
		d.Push(m, sym[:n], now, func([]byte, bool) bool { return true })
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

// checkDue reports a slot whose entry in the expiry array (Decoder.due)
// disagrees with it: a group not yet accounted for must be there with its
// start, and nothing else.
func checkDue(d *Decoder) error {
	for i := range d.slots {
		s := &d.slots[i]
		want := int64(0)
		if s.state != stateFree && !s.accounted {
			want = s.start
		}
		if d.due[i] != want {
			return fmt.Errorf("slot %d (group %d, state %d, accounted %v): due %d, want %d", i, s.group, s.state, s.accounted, d.due[i], want)
		}
	}
	return nil
}

func storedSlabs(d *Decoder) int {
	n := 0
	for i := range d.slots {
		if d.slots[i].state == stateFree {
			continue
		}
		for j := range d.slots[i].bufs {
			if d.slots[i].buf(j) >= 0 {
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

// TestUnusedKeysCarryNoWindow: a decoder that never received and an
// encoder that never sent hold no window, free list or parity slabs (a
// hub's thousands of lanes that are idle, and every lane's keys replaced
// before use), and they grow them at the first symbol. A slot holds no
// pointer, so the window a busy lane holds is no work for the garbage
// collector.
func TestUnusedKeysCarryNoWindow(t *testing.T) {
	d := NewDecoder(DecoderConfig{})
	if d.slots != nil || d.free != nil || d.arena != nil {
		t.Fatalf("a new decoder holds %d slots, %d free-list entries of room, %d slabs", len(d.slots), cap(d.free), len(d.arena))
	}
	var got [][]byte
	d.Push(Meta{Kind: KindData, Group: 7, Index: 0, K: 2, R: 1}, []byte("abc"), t0, func(p []byte, _ bool) bool { got = append(got, slices.Clone(p)); return true })
	if len(d.slots) != DefaultMaxGroups || len(got) != 1 {
		t.Fatalf("after the first symbol: %d slots, %d delivered", len(d.slots), len(got))
	}
	e, err := NewEncoder(EncoderConfig{K: 4, R: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.cls {
		for j := range e.cls[i].grp {
			if n := len(e.cls[i].grp[j].parity); n != 0 {
				t.Fatalf("a new encoder holds %d parity slabs in class %d", n, i)
			}
		}
	}
	if hasPointers(reflect.TypeFor[slot]()) {
		t.Fatal("slot holds a pointer: every busy lane's window is scanned at every GC cycle")
	}
}

// hasPointers reports whether a value of type t holds a pointer.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}
