package ring

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSPSCSizeChecks(t *testing.T) {
	for _, n := range []int{0, 1, 3, 100, 1 << 25} {
		if _, err := NewSPSC[int](n); err == nil {
			t.Errorf("size %d accepted", n)
		}
	}
}

func TestSPSCFullEmptyWrap(t *testing.T) {
	r, _ := NewSPSC[int](8)
	out := make([]int, 16)
	if r.Pop(out) != 0 {
		t.Fatal("pop from empty ring")
	}
	next, want := 0, 0
	for round := range 50 {
		in := make([]int, 1+round%11)
		for i := range in {
			in[i] = next + i
		}
		n := r.Push(in)
		if n > len(in) || r.Len() > r.Cap() {
			t.Fatalf("pushed %d of %d, len %d", n, len(in), r.Len())
		}
		next += n
		if r.Len() == r.Cap() && r.Push([]int{-1}) != 0 {
			t.Fatal("push into full ring")
		}
		m := r.Pop(out[:1+round%5])
		for _, v := range out[:m] {
			if v != want {
				t.Fatalf("got %d, want %d", v, want)
			}
			want++
		}
	}
	for m := r.Pop(out); m > 0; m = r.Pop(out) {
		for _, v := range out[:m] {
			if v != want {
				t.Fatalf("drain: got %d, want %d", v, want)
			}
			want++
		}
	}
	if want != next {
		t.Fatalf("lost items: popped %d, pushed %d", want, next)
	}
}

// Several producers, each with its own SPSC ring into one consumer (the
// shard layout): every item arrives exactly once and in order per producer.
// The consumer sleeps on the Waker when all rings are empty.
func TestSPSCConcurrentProducers(t *testing.T) {
	const producers, items, batch = 3, 200000, 32
	type item struct{ from, seq int }
	w, err := NewWaker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rings := make([]*SPSC[item], producers)
	for i := range rings {
		rings[i], _ = NewSPSC[item](256)
	}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]item, 0, batch)
			for seq := 0; seq < items; {
				buf = buf[:0]
				for i := 0; i < batch && seq+i < items; i++ {
					buf = append(buf, item{p, seq + i})
				}
				for sent := 0; sent < len(buf); {
					n := rings[p].Push(buf[sent:])
					sent += n
					w.Wake()
					if n == 0 {
						// Full: let the consumer run (2 cores, 4 goroutines).
						runtime.Gosched()
					}
				}
				seq += len(buf)
			}
		}()
	}
	next := make([]int, producers)
	out := make([]item, batch)
	total := 0
	for total < producers*items {
		got := 0
		for p, r := range rings {
			n := r.Pop(out)
			for _, it := range out[:n] {
				if it.from != p || it.seq != next[p] {
					t.Fatalf("producer %d: got %+v, want seq %d", p, it, next[p])
				}
				next[p]++
			}
			got += n
		}
		total += got
		if got == 0 {
			w.PrepareSleep()
			empty := true
			for _, r := range rings {
				if r.Len() > 0 {
					empty = false
				}
			}
			if empty {
				fds := []unix.PollFd{{Fd: int32(w.Fd()), Events: unix.POLLIN}}
				if _, err := unix.Poll(fds, 1000); err != nil && err != unix.EINTR {
					t.Fatal(err)
				}
			}
			w.CancelSleep()
			w.Drain()
		}
	}
	wg.Wait()
	for p, n := range next {
		if n != items {
			t.Fatalf("producer %d: %d of %d items", p, n, items)
		}
	}
	t.Logf("%d items, %d eventfd wake-ups", total, w.Wakes())
}

// A producer must never write the eventfd while the consumer is awake.
func TestWakerOnlyWhenSleeping(t *testing.T) {
	w, err := NewWaker()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 100 {
		w.Wake()
	}
	if w.Wakes() != 0 {
		t.Fatalf("%d wake-ups of an awake consumer", w.Wakes())
	}
	w.PrepareSleep()
	w.Wake()
	w.Wake()
	if w.Wakes() != 1 {
		t.Fatalf("%d wake-ups for one sleep", w.Wakes())
	}
	fds := []unix.PollFd{{Fd: int32(w.Fd()), Events: unix.POLLIN}}
	if n, _ := unix.Poll(fds, 0); n != 1 {
		t.Fatal("eventfd not readable after Wake")
	}
	w.Drain()
	if n, _ := unix.Poll(fds, 0); n != 0 {
		t.Fatal("eventfd still readable after Drain")
	}
}
