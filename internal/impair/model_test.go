package impair

import (
	"math"
	"testing"
	"time"
)

const frame = 1414 // a 1400-byte IP packet in an Ethernet frame

func within(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", name, got, want, tol)
	} else {
		t.Logf("%s = %.4f (want %.4f ± %.4f)", name, got, want, tol)
	}
}

func TestRandomLoss(t *testing.T) {
	m := NewModel(Direction{Loss: 0.05, Seed: 1})
	const n = 1_000_000
	for i := range n {
		m.Decide(int64(i)*1000, frame)
	}
	within(t, "loss rate", float64(m.Stats.DropLoss)/n, 0.05, 0.002)
	if m.Stats.Delayed+m.Stats.DropLoss != n {
		t.Errorf("stats do not add up: %+v", m.Stats)
	}
}

func TestGilbertElliott(t *testing.T) {
	g := BurstLoss(1, 4, 0.05)
	within(t, "model's stationary loss", g.LossRate(), 0.05, 1e-9)
	m := NewModel(Direction{Burst: &g, Seed: 2})
	const n = 1_000_000
	var runs, lost, run int
	for i := range n {
		if _, c := m.Decide(int64(i)*1000, frame); c == DropBurst {
			lost++
			run++
		} else if run > 0 {
			runs++
			run = 0
		}
	}
	within(t, "stationary loss", float64(lost)/n, 0.05, 0.005)
	within(t, "mean burst length", float64(lost)/float64(runs), 4, 0.2)

	// LossBad < 1: the loss rate still matches the formula.
	g = BurstLoss(0.5, 10, 0.02)
	m = NewModel(Direction{Burst: &g, Seed: 3})
	for i := range n {
		m.Decide(int64(i)*1000, frame)
	}
	within(t, "stationary loss (LossBad 0.5)", float64(m.Stats.DropBurst)/n, 0.02, 0.003)
}

func TestDelayJitter(t *testing.T) {
	const delay, jitter = 25 * time.Millisecond, 5 * time.Millisecond
	m := NewModel(Direction{Delay: delay, Jitter: jitter, Seed: 4})
	var last int64
	var lo, hi int64 = math.MaxInt64, 0
	for i := range 100_000 {
		now := int64(i) * int64(2*jitter) // far enough apart that the order clamp never acts
		due, c := m.Decide(now, frame)
		if c != Pass {
			t.Fatal(c)
		}
		if due < last {
			t.Fatalf("frame %d due before the one ahead of it", i)
		}
		last = due
		d := due - now
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < int64(delay-jitter) || hi > int64(delay+jitter) || lo > int64(delay-jitter/2) || hi < int64(delay+jitter/2) {
		t.Errorf("delays in [%v, %v], want within and spread over %v ± %v", time.Duration(lo), time.Duration(hi), delay, jitter)
	}
	if m.Stats.Reordered != 0 {
		t.Errorf("jitter reordered %d", m.Stats.Reordered)
	}
}

func TestReorder(t *testing.T) {
	m := NewModel(Direction{Delay: 10 * time.Millisecond, Reorder: 0.1, ReorderDelay: 2 * time.Millisecond, Seed: 5})
	q := NewQueue(1<<17, 16)
	const n = 100_000
	for i := range n {
		due, _ := m.Decide(int64(i)*10_000, frame) // 100 kpps: 20 frames overtake each
		s, _ := q.Get()
		q.Buf(s)[0] = 0
		q.Push(s, i, due)
	}
	within(t, "reordered fraction", float64(m.Stats.Reordered)/n, 0.1, 0.005)
	// Count frames that leave after a later-sent one.
	late, maxSeen := 0, -1
	for q.Len() > 0 {
		_, i := q.Pop()
		if i < maxSeen {
			late++
		}
		maxSeen = max(maxSeen, i)
	}
	within(t, "frames arriving out of order", float64(late)/n, 0.1, 0.005)
}

func TestRateLimit(t *testing.T) {
	const rate = 10_000_000 // 80 Mbit/s
	m := NewModel(Direction{Rate: rate, QueueBytes: 50_000, Seed: 6})
	// Offer twice the rate for 10 s.
	const gap = int64(frame) * 1e9 / (2 * rate)
	var bytes, lastDue int64
	end := int64(10e9)
	for now := int64(0); now < end; now += gap {
		due, c := m.Decide(now, frame)
		if c == Pass {
			bytes += frame
			lastDue = due
			if wait := due - now; float64(wait)*rate/1e9 > 50_000 {
				t.Fatalf("frame waits %v, beyond the queue bound", time.Duration(wait))
			}
		}
	}
	within(t, "throughput (MB/s)", float64(bytes)/(float64(lastDue)/1e9)/1e6, rate/1e6, 0.01*rate/1e6)
	within(t, "share dropped by the rate limit", float64(m.Stats.DropRate)/float64(m.Stats.Seen), 0.5, 0.01)
}

func TestQueueBound(t *testing.T) {
	q := NewQueue(8, 64)
	for i := range 8 {
		s, ok := q.Get()
		if !ok {
			t.Fatalf("slot %d unavailable", i)
		}
		q.Push(s, i, int64(8-i))
	}
	if _, ok := q.Get(); ok {
		t.Fatal("a ninth slot out of eight")
	}
	for want := 7; want >= 0; want-- {
		s, n := q.Pop()
		if n != want {
			t.Fatalf("popped %d, want %d (due order)", n, want)
		}
		q.Put(s)
	}
	if q.Free() != 8 || q.Len() != 0 {
		t.Fatalf("free %d len %d", q.Free(), q.Len())
	}
}

func TestNoAllocs(t *testing.T) {
	g := BurstLoss(1, 3, 0.01)
	m := NewModel(Direction{Delay: 25 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.01, Burst: &g,
		Reorder: 0.01, Rate: 1e8, Seed: 7})
	q := NewQueue(1024, 2048)
	var now int64
	allocs := testing.AllocsPerRun(10_000, func() {
		now += 10_000
		if due, c := m.Decide(now, frame); c == Pass {
			if s, ok := q.Get(); ok {
				q.Push(s, frame, due)
			}
		}
		for {
			due, ok := q.Peek()
			if !ok || due > now {
				break
			}
			s, _ := q.Pop()
			q.Put(s)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per frame", allocs)
	}
}

// Parameters no burst model can give are refused as no burst loss, not a
// division by zero or a negative probability.
func TestBurstLossImpossibleParameters(t *testing.T) {
	for _, c := range [][3]float64{{0.5, 4, 0.5}, {0.5, 4, 0.9}, {0, 4, 0.1}, {1, 0.5, 0.1}, {1, 4, 0}} {
		if g := BurstLoss(c[0], c[1], c[2]); g != (GilbertElliott{}) {
			t.Errorf("BurstLoss%v = %+v, want no burst loss", c, g)
		}
	}
}
