// Package impair emulates a WAN between the lab's two gateways: per
// direction a fixed delay with jitter, random loss, Gilbert–Elliott burst
// loss, reordering and a token-bucket rate limit with a bounded queue.
//
// The model (Model, Queue) is pure: time is passed in as nanoseconds, so
// unit tests drive it with a fake clock. The Linux bridge (Bridge) runs it
// between two veth links of a middle namespace that has no IP addresses
// and no kernel forwarding: AF_PACKET sockets read every frame on one link
// and write it, when due, on the other, so both ends see one Ethernet
// segment (ARP and neighbour discovery cross it too).
//
// Order of the stages for one frame: burst loss (Gilbert–Elliott), random
// loss, rate limit (the bottleneck), then propagation delay with jitter and
// the reordering extra delay.
package impair

import (
	"math/rand/v2"
	"time"
)

// GilbertElliott is a two-state burst-loss model, parameterised by its
// transition probabilities (per frame): P from Good to Bad, R from Bad to
// Good. A frame in Bad is lost with LossBad, in Good with LossGood. The
// mean time in Bad is 1/R frames, the stationary share of Bad is
// P/(P+R), and the stationary loss rate is
// (P·LossBad + R·LossGood)/(P+R). See BurstLoss for the other
// parameterisation.
type GilbertElliott struct {
	P, R              float64
	LossBad, LossGood float64
}

// BurstLoss returns the Gilbert–Elliott model whose Bad state loses
// frames with lossBad (Good loses none), stays meanBurst frames on average
// (R = 1/meanBurst; with lossBad 1 that is the mean length of a run of
// losses) and whose stationary loss rate is rate.
// A rate of zero, or one not below lossBad (no burst model gives it), or a
// mean burst under one frame gives no burst loss.
func BurstLoss(lossBad, meanBurst, rate float64) GilbertElliott {
	if rate <= 0 || lossBad <= 0 || rate >= lossBad || meanBurst < 1 {
		return GilbertElliott{}
	}
	r := 1 / meanBurst
	piBad := rate / lossBad
	return GilbertElliott{P: r * piBad / (1 - piBad), R: r, LossBad: lossBad}
}

// LossRate is the model's stationary loss rate.
func (g GilbertElliott) LossRate() float64 {
	if g.P+g.R == 0 {
		return 0
	}
	return (g.P*g.LossBad + g.R*g.LossGood) / (g.P + g.R)
}

// Direction is the impairment of one direction.
type Direction struct {
	// Delay is the one-way propagation delay; each frame gets Delay plus a
	// uniform jitter in [-Jitter, +Jitter] (never below zero). Jitter alone
	// keeps frames in order (a frame is never due before the one ahead of
	// it), as on a real path; only Reorder reorders.
	Delay, Jitter time.Duration
	// Loss is the probability that a frame is dropped at random.
	Loss float64
	// Burst, when not nil, adds Gilbert–Elliott burst loss.
	Burst *GilbertElliott
	// Reorder is the fraction of frames that get ReorderDelay (default
	// 1 ms) on top of their delay, so later frames overtake them.
	Reorder      float64
	ReorderDelay time.Duration
	// Rate limits the direction to Rate bytes/s of Ethernet frames (0:
	// unlimited) with a token bucket of Burst bytes (default 3028, two
	// full frames). Frames beyond the bucket queue: a frame that would
	// wait longer than QueueBytes at Rate (default Rate/10, 100 ms) is
	// dropped (tail drop), counted DropRate.
	Rate       int64
	RateBurst  int64
	QueueBytes int64
	// Seed seeds the direction's random numbers (0: a fixed default).
	Seed uint64
}

// Cause is a model's verdict on a frame.
type Cause int

// Verdicts.
const (
	Pass      Cause = iota
	DropLoss        // random loss
	DropBurst       // Gilbert–Elliott burst loss
	DropRate        // the rate limiter's queue is full
)

// Stats counts what one direction did with the frames it saw.
type Stats struct {
	Seen      uint64 // frames read
	Sent      uint64 // frames written
	Bytes     uint64 // bytes of frames written
	Delayed   uint64 // frames queued for sending (all that passed)
	DelayNs   uint64 // sum of their queueing time (rate wait + delay), ns
	Reordered uint64 // frames that got the reordering extra delay
	DropLoss  uint64 // random loss
	DropBurst uint64 // Gilbert–Elliott loss
	DropRate  uint64 // rate limiter queue full
	DropFull  uint64 // no free buffer in the bridge (its frame queue is full)
	DropSend  uint64 // the write to the other link failed
	DropBig   uint64 // frame larger than a buffer (offloads left on?)
}

// Dropped is the sum of all drops.
func (s Stats) Dropped() uint64 {
	return s.DropLoss + s.DropBurst + s.DropRate + s.DropFull + s.DropSend + s.DropBig
}

// Model decides the fate and due time of each frame of one direction. It
// does not allocate per frame and is not safe for concurrent use.
type Model struct {
	d       Direction
	rng     *rand.Rand
	seed    uint64
	bad     bool
	tat     int64 // rate limiter: theoretical arrival time, ns
	lastDue int64
	Stats   Stats
}

// NewModel returns the model of direction d.
func NewModel(d Direction) *Model {
	m := &Model{}
	m.Set(d)
	return m
}

// Set changes the model's parameters, keeping its state and counters (and
// its random stream unless d.Seed changes it).
func (m *Model) Set(d Direction) {
	if d.Reorder > 0 && d.ReorderDelay == 0 {
		d.ReorderDelay = time.Millisecond
	}
	if d.Rate > 0 {
		if d.RateBurst == 0 {
			d.RateBurst = 3028
		}
		if d.QueueBytes == 0 {
			d.QueueBytes = d.Rate / 10
		}
	}
	seed := d.Seed
	if seed == 0 {
		seed = 0x9e3779b97f4a7c15
	}
	if m.rng == nil || seed != m.seed {
		m.rng = rand.New(rand.NewPCG(seed, seed^0xda942042e4dd58b5))
		m.seed = seed
	}
	m.d = d
}

// Decide returns what happens to a frame of size bytes that arrives at
// now (ns, any monotonic origin): Pass and the time it is due out, or the
// cause of its drop. It counts the verdict in m.Stats.
func (m *Model) Decide(now int64, size int) (due int64, c Cause) {
	m.Stats.Seen++
	if g := m.d.Burst; g != nil {
		if m.bad {
			if m.rng.Float64() < g.R {
				m.bad = false
			}
		} else if m.rng.Float64() < g.P {
			m.bad = true
		}
		p := g.LossGood
		if m.bad {
			p = g.LossBad
		}
		if p > 0 && m.rng.Float64() < p {
			m.Stats.DropBurst++
			return 0, DropBurst
		}
	}
	if m.d.Loss > 0 && m.rng.Float64() < m.d.Loss {
		m.Stats.DropLoss++
		return 0, DropLoss
	}
	start := now
	if r := m.d.Rate; r > 0 {
		// GCRA, the token bucket's equivalent: a frame may leave once
		// the bucket (RateBurst bytes) has room for it.
		cost := int64(size) * 1e9 / r
		tau := m.d.RateBurst * 1e9 / r
		if s := m.tat - tau; s > start {
			start = s
		}
		if float64(start-now)*float64(r)/1e9 > float64(m.d.QueueBytes) {
			m.Stats.DropRate++
			return 0, DropRate
		}
		m.tat = max(m.tat, now) + cost
	}
	due = start + int64(m.d.Delay)
	if j := int64(m.d.Jitter); j > 0 {
		due += m.rng.Int64N(2*j+1) - j
		due = max(due, start)
	}
	if m.d.Reorder > 0 && m.rng.Float64() < m.d.Reorder {
		due = max(due, m.lastDue) + int64(m.d.ReorderDelay)
		m.Stats.Reordered++
	} else {
		due = max(due, m.lastDue)
		m.lastDue = due
	}
	m.Stats.Delayed++
	m.Stats.DelayNs += uint64(due - now)
	return due, Pass
}
