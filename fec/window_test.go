// Tests of the Decoder's window (window.go): its bounds, resynchronising
// only forwards, Head, and expiry at each group's TTL.

package fec

import (
	"slices"
	"testing"
	"time"
)

// TestWindowBounds: far-ahead and late symbols are dropped and counted, the
// window slides, expired groups free storage, and a late original after
// expiry is delivered once and never twice.
func TestWindowBounds(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 8, GroupTTL: 100 * time.Millisecond})
	var n int
	count := func([]byte, bool) bool { n++; return true }
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
	deliver := func(b []byte, _ bool) bool { got = append(got, string(b)); return true }
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

// Head follows the newest group the window accepted, and only that: a
// group refused as far ahead or late leaves it where it was.
func TestHead(t *testing.T) {
	d := NewDecoder(DecoderConfig{MaxGroups: 4})
	if _, ok := d.Head(); ok {
		t.Fatal("head before the first symbol")
	}
	nop := func([]byte, bool) bool { return true }
	for _, c := range []struct {
		group, want uint32
	}{{7, 7}, {9, 9}, {8, 9}, {100, 9}, {0xFFFFFFF0, 9}, {12, 12}} {
		d.Push(Meta{Kind: KindData, Group: c.group, K: 1, R: 0}, []byte{1}, t0, nop)
		if h, ok := d.Head(); !ok || h != c.want {
			t.Fatalf("after group %d: head %d, %v; want %d", c.group, h, ok, c.want)
		}
	}
}

// Tick expires each group at its own deadline, whatever order groups were
// opened and finished in, and reports when it closed one.
func TestTickExpiresEachGroupOnTime(t *testing.T) {
	d := NewDecoder(DecoderConfig{GroupTTL: 100 * time.Millisecond})
	push := func(g uint32, at time.Duration) {
		d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 4, R: 1}, []byte("x"), t0.Add(at), func([]byte, bool) bool { return true })
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
