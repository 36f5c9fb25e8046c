package ring

import "testing"

func TestPool(t *testing.T) {
	if _, err := NewPool(1, 0, 2048); err == nil {
		t.Fatal("empty pool accepted")
	}
	p, err := NewPool(3, 4, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var got []*Packet
	for range 4 {
		pk := p.Get()
		if pk == nil || pk.Owner != 3 || cap(pk.Buf) != 2048 || len(pk.Buf) != 2048 {
			t.Fatalf("bad packet %+v", pk)
		}
		got = append(got, pk)
	}
	if p.Get() != nil || p.LowWater() != 0 {
		t.Fatal("exhausted pool handed out a buffer")
	}
	// Buffers do not overlap: appending to one cannot reach another.
	got[0].Buf[2047] = 1
	if got[1].Buf[0] != 0 || cap(got[0].Buf[:1]) != 2048 {
		t.Fatal("buffers overlap")
	}
	for _, pk := range got {
		p.Put(pk)
	}
	if p.Free() != 4 {
		t.Fatalf("free %d", p.Free())
	}
	other, _ := NewPool(4, 1, 64)
	mustPanic(t, func() { p.Put(other.Get()) })
	mustPanic(t, func() { p.Put(&p.pkts[0]) }) // double put: already full
	if a := testing.AllocsPerRun(1000, func() { p.Put(p.Get()) }); a != 0 {
		t.Fatalf("Get/Put allocates %.1f", a)
	}
}

func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	f()
}

func TestSPSCZeroAlloc(t *testing.T) {
	r, _ := NewSPSC[*Packet](64)
	p, _ := NewPool(0, 32, 64)
	batch := make([]*Packet, 32)
	if a := testing.AllocsPerRun(1000, func() {
		for i := range batch {
			batch[i] = p.Get()
		}
		r.Push(batch)
		n := r.Pop(batch)
		for _, pk := range batch[:n] {
			p.Put(pk)
		}
	}); a != 0 {
		t.Fatalf("push/pop allocates %.1f", a)
	}
}
