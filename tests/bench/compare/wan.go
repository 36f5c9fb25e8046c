package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
)

// wan is the emulated WAN both topologies run through when any of its
// flags is set (the same flags and meaning as tests/impair's): the
// internal/impair bridge in a middle namespace between the two gateway
// namespaces, the same impairment in both directions.
type wan struct {
	Delay   time.Duration `json:"delay_ns"`
	Jitter  time.Duration `json:"jitter_ns,omitempty"`
	Loss    float64       `json:"loss,omitempty"`
	GEBad   float64       `json:"ge_bad,omitempty"`
	GEBurst float64       `json:"ge_burst,omitempty"`
	GERate  float64       `json:"ge_rate,omitempty"`
	// Bottleneck is a rate limit in each direction, bits/s of Ethernet
	// frames (0: none), in front of a tail-drop queue of Queue bytes.
	// Loss is applied before the queue, as on a lossy access link in
	// front of a congested router.
	Bottleneck int64  `json:"bottleneck_bps,omitempty"`
	Queue      int64  `json:"queue_bytes,omitempty"`
	Seed       uint64 `json:"seed"`
}

// udpRateWAN is the default offered rate of the fixed-rate UDP test over
// the bridge: issue 11's UDP target rate, well under what the bridge can
// carry (it saturates at about 650 Mbit/s of 1400-byte frames).
const udpRateWAN = "100M"

// addWANFlags defines the impairment flags on fs.
func addWANFlags(fs *flag.FlagSet) *wan {
	w := &wan{}
	fs.DurationVar(&w.Delay, "delay", 0, "WAN: one-way delay, each direction (any WAN flag puts both implementations through the impairment bridge)")
	fs.DurationVar(&w.Jitter, "jitter", 0, "WAN: uniform jitter ± (keeps order)")
	fs.Float64Var(&w.Loss, "loss", 0, "WAN: random loss probability, each direction")
	fs.Float64Var(&w.GEBad, "ge-bad", 1, "WAN: Gilbert–Elliott loss probability in the bad state")
	fs.Float64Var(&w.GEBurst, "ge-burst", 0, "WAN: Gilbert–Elliott mean bad-state length in frames (0: off)")
	fs.Float64Var(&w.GERate, "ge-rate", 0, "WAN: Gilbert–Elliott stationary loss rate")
	fs.Func("bottleneck", "WAN: rate limit each direction, bits/s of frames with k/M/G suffixes (e.g. 200M; a tail-drop queue behind it, see -queue)", func(v string) error {
		r, err := parseBits(v)
		w.Bottleneck = r
		return err
	})
	fs.Int64Var(&w.Queue, "queue", 0, "WAN: the bottleneck's queue, bytes (default one bandwidth-delay product: the rate times twice -delay, at least 64 KiB)")
	fs.Uint64Var(&w.Seed, "seed", 1, "WAN: random seed of round 1 (round n uses seed+n-1; the B→A direction its own offset)")
	return w
}

// active reports whether any impairment is set.
func (w *wan) active() bool {
	return w.Delay > 0 || w.Jitter > 0 || w.Loss > 0 || w.GEBurst > 0 || w.Bottleneck > 0
}

// minQueue is the smallest default bottleneck queue: about 45 full
// frames, so a path without delay still has a queue to fill.
const minQueue = 64 << 10

// queueBytes is the bottleneck's queue: -queue, or one bandwidth-delay
// product of the emulated path (rate × round trip), the rule of thumb
// for a router's buffer.
func (w *wan) queueBytes() int64 {
	if w.Queue > 0 || w.Bottleneck == 0 {
		return w.Queue
	}
	bdp := int64(float64(w.Bottleneck) / 8 * (2 * w.Delay).Seconds())
	return max(bdp, minQueue)
}

// queueTime is the full queue's delay at the bottleneck's rate (as the
// model has it, whole bytes/s), past which it tail-drops; 0 without a
// bottleneck.
func (w *wan) queueTime() time.Duration {
	if w.Bottleneck < 8 {
		return 0
	}
	return time.Duration(float64(w.queueBytes()) / float64(w.Bottleneck/8) * 1e9)
}

// parseBits reads a rate in bits/s with an optional SI suffix (k, M, G),
// the way iperf3 -b spells it.
func parseBits(v string) (int64, error) {
	mult := 1.0
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'k', 'K':
			mult, v = 1e3, v[:n-1]
		case 'm', 'M':
			mult, v = 1e6, v[:n-1]
		case 'g', 'G':
			mult, v = 1e9, v[:n-1]
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if f *= mult; err != nil || !(f >= 0 && f <= 1e15) { // NaN fails both
		return 0, fmt.Errorf("%q: want bits/s up to 1000T, e.g. 200M", v)
	}
	return int64(f), nil
}

// recorded is the impairment as the run records it: nil when none is
// set, and without -ge-bad's default when there is no burst loss.
func (w *wan) recorded() *wan {
	if !w.active() {
		return nil
	}
	r := *w
	if r.GEBurst == 0 {
		r.GEBad = 0
	}
	r.Queue = w.queueBytes()
	return &r
}

// check rejects values the model would ignore or cannot give.
func (w *wan) check() error {
	switch {
	case w.Delay < 0 || w.Jitter < 0:
		return fmt.Errorf("delay %s, jitter %s: want ≥ 0", w.Delay, w.Jitter)
	case w.Loss < 0 || w.Loss >= 1:
		return fmt.Errorf("loss %g: want a probability in [0, 1)", w.Loss)
	case w.Queue < 0:
		return fmt.Errorf("queue %d: want ≥ 0 bytes", w.Queue)
	case w.Queue > 0 && w.Bottleneck == 0:
		return fmt.Errorf("queue %d: a queue needs a -bottleneck in front of it", w.Queue)
	case w.Bottleneck < 0 || w.Bottleneck > 0 && w.Bottleneck < 1e6:
		return fmt.Errorf("bottleneck %d bit/s: want at least 1M (or 0: none)", w.Bottleneck)
	case w.Bottleneck > 0 && w.queueBytes() < 3028:
		return fmt.Errorf("queue %d: want room for at least two full frames", w.queueBytes())
	case w.GEBurst == 0:
		return nil
	case w.GEBurst < 1:
		return fmt.Errorf("ge-burst %g: want at least 1 frame (or 0: off)", w.GEBurst)
	case w.GEBad <= 0 || w.GEBad > 1:
		return fmt.Errorf("ge-bad %g: want a probability in (0, 1]", w.GEBad)
	case w.GERate <= 0 || w.GERate >= w.GEBad:
		return fmt.Errorf("ge-rate %g: want above 0 and below ge-bad %g", w.GERate, w.GEBad)
	}
	return nil
}

// config is the bridge's impairment in round (from 1): both directions
// alike, seeded per round and per direction (impair.Both), the same for
// both implementations in one round.
func (w *wan) config(round int) *impair.Config {
	d := impair.Direction{Delay: w.Delay, Jitter: w.Jitter, Loss: w.Loss, Seed: w.Seed + uint64(round-1),
		Rate: w.Bottleneck / 8, QueueBytes: w.queueBytes()}
	if w.GEBurst > 0 {
		g := impair.BurstLoss(w.GEBad, w.GEBurst, w.GERate)
		d.Burst = &g
	}
	return impair.Both(d)
}

// String describes the impairment for the results' header.
func (w *wan) String() string {
	var parts []string
	if w.Delay > 0 {
		parts = append(parts, w.Delay.String()+" one-way delay")
	}
	if w.Jitter > 0 {
		parts = append(parts, "±"+w.Jitter.String()+" jitter")
	}
	if w.Loss > 0 {
		parts = append(parts, fmt.Sprintf("%g%% random loss", 100*w.Loss))
	}
	if w.GEBurst > 0 {
		parts = append(parts, fmt.Sprintf("Gilbert–Elliott burst loss (%g%% stationary, mean burst %g frames, %g%% lost in the bad state)",
			100*w.GERate, w.GEBurst, 100*w.GEBad))
	}
	if w.Bottleneck > 0 {
		parts = append(parts, fmt.Sprintf("a %g Mbit/s bottleneck with a %d KiB tail-drop queue (after the loss)",
			float64(w.Bottleneck)/1e6, w.queueBytes()>>10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ") + " in each direction"
}

// bridgeStats is one direction of the bridge over one run.
type bridgeStats struct {
	Seen      uint64 `json:"seen"`
	Sent      uint64 `json:"sent"`
	DropLoss  uint64 `json:"drop_loss"`  // random loss
	DropBurst uint64 `json:"drop_burst"` // Gilbert–Elliott loss
	// DropFull: no free buffer in the bridge (it fell behind).
	DropFull uint64 `json:"drop_full"`
	// DropQueue: the bottleneck's queue was full (tail drop).
	DropQueue uint64 `json:"drop_queue,omitempty"`
	// DropOther: failed writes, oversized frames.
	DropOther   uint64  `json:"drop_other"`
	MeanDelayMs float64 `json:"mean_delay_ms"` // of the frames that passed
}

// bridgeDelta is the bridge's work between two counter snapshots.
func bridgeDelta(before, after [2]impair.Stats) []bridgeStats {
	out := make([]bridgeStats, 2)
	for i := range after {
		a, b := after[i], before[i]
		out[i] = bridgeStats{
			Seen: a.Seen - b.Seen, Sent: a.Sent - b.Sent,
			DropLoss: a.DropLoss - b.DropLoss, DropBurst: a.DropBurst - b.DropBurst, DropFull: a.DropFull - b.DropFull,
			DropQueue:   a.DropRate - b.DropRate,
			DropOther:   (a.DropSend + a.DropBig) - (b.DropSend + b.DropBig),
			MeanDelayMs: div(float64(a.DelayNs-b.DelayNs), float64(a.Delayed-b.Delayed)) / 1e6,
		}
	}
	return out
}
