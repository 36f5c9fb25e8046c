package main

// When the bottleneck drops, against how long its queue was: the A→B
// counters read in binEvery bins over each iperf3 run's steady window,
// beside the sender's latest path state. A sender whose delay signal is
// sampled about once a second can only see overflows that come after a
// queue standing high for a while (issue 25); the bins say whether they
// do.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
)

// binEvery is one bin: a few per round trip of the paths measured, and
// shorter than pathEvery, so a drop bin has a path sample at most 250 ms
// old.
const binEvery = 100 * time.Millisecond

// queueBin is the A→B direction over one bin.
type queueBin struct {
	At    time.Duration // the bin's end, from the first reading
	Drops uint64        // the queue's tail drops (impair's DropRate)
	// QueueMs is the mean queueing delay of the frames that passed
	// (their time in the bridge less the propagation delay); NaN when
	// none did.
	QueueMs float64
	Path    string // the sender's latest path state ("": none read yet)
	Detail  string // and its lane's round trip and FEC (pathSample)
}

// queueDrops sums up a run's bins (Record.QueueDrops). Shares are left
// to Record's methods, so no field is undefined when nothing dropped.
type queueDrops struct {
	Bins     int    `json:"bins"`
	DropBins int    `json:"drop_bins"`
	Episodes int    `json:"episodes"` // maximal runs of consecutive drop bins
	Drops    uint64 `json:"drops"`
	// CapacityMs is the full queue's delay (queue bytes / rate), the
	// delay at which it drops.
	CapacityMs float64 `json:"capacity_ms"`
	// HalfFull is the drops in a bin whose queue delay, or the previous
	// bin's, was at least half CapacityMs: overflows a delay signal
	// could have seen coming.
	HalfFull uint64 `json:"drops_half_full"`
	// Queue delay per bin (bins where frames passed): mean, max, and the
	// median of the drop bins (0 when none).
	QueueMeanMs    float64 `json:"queue_mean_ms"`
	QueueMaxMs     float64 `json:"queue_max_ms"`
	DropQueueMedMs float64 `json:"drop_bins_queue_median_ms"`
	// PathSeen is the drops in a bin after the sender's first path
	// sample (0 for wireguard-go), PathQueued those of them whose latest
	// sample found the path queued, drained or split.
	PathSeen   uint64 `json:"drops_path_seen"`
	PathQueued uint64 `json:"drops_path_queued"`
}

// summarizeQueue sums up bins against a queue of capacityMs; nil for
// none.
func summarizeQueue(bins []queueBin, capacityMs float64) *queueDrops {
	if len(bins) == 0 {
		return nil
	}
	s := &queueDrops{Bins: len(bins), CapacityMs: capacityMs}
	var sum float64
	var n int
	var dropQ []float64
	half := func(i int) bool { return i >= 0 && bins[i].QueueMs >= capacityMs/2 } // NaN: false
	for i, b := range bins {
		if !math.IsNaN(b.QueueMs) {
			sum += b.QueueMs
			n++
			s.QueueMaxMs = max(s.QueueMaxMs, b.QueueMs)
		}
		if b.Drops == 0 {
			continue
		}
		s.DropBins++
		s.Drops += b.Drops
		if i == 0 || bins[i-1].Drops == 0 {
			s.Episodes++
		}
		if half(i) || half(i-1) {
			s.HalfFull += b.Drops
		}
		if !math.IsNaN(b.QueueMs) {
			dropQ = append(dropQ, b.QueueMs)
		}
		if b.Path != "" {
			s.PathSeen += b.Drops
			if congested(b.Path) {
				s.PathQueued += b.Drops
			}
		}
	}
	s.QueueMeanMs = div(sum, float64(n))
	s.DropQueueMedMs = median(dropQ)
	return s
}

// queueBinOf is one bin from two readings of a direction's counters, for
// a propagation delay of delay.
func queueBinOf(from, to impair.Stats, delay time.Duration) queueBin {
	b := queueBin{Drops: to.DropRate - from.DropRate, QueueMs: math.NaN()}
	if n := to.Delayed - from.Delayed; n > 0 {
		b.QueueMs = (float64(to.DelayNs-from.DelayNs)/float64(n) - float64(delay)) / 1e6
	}
	return b
}

// sampleQueue reads the bridge's A→B counters every binEvery until until
// or ctx ends, each bin with the latest path state in path; nil without
// a bridge.
func sampleQueue(ctx context.Context, t topology, until time.Time, delay time.Duration, path *atomic.Pointer[pathSample]) []queueBin {
	prev, ok := t.Bridge()
	if !ok {
		return nil
	}
	start := time.Now()
	var bins []queueBin
	for next := start.Add(binEvery); !next.After(until); next = next.Add(binEvery) {
		if !sleepCtx(ctx, time.Until(next)) {
			break
		}
		cur, ok := t.Bridge()
		if !ok {
			continue // no reading: the next bin spans both
		}
		b := queueBinOf(prev[0], cur[0], delay)
		b.At = time.Since(start)
		if p := path.Load(); p != nil {
			b.Path, b.Detail = p.State, p.Detail
		}
		bins, prev = append(bins, b), cur
	}
	return bins
}

// sampleSteady runs samplePaths and, with a bottleneck on w, sampleQueue
// side by side until until.
func sampleSteady(ctx context.Context, t topology, until time.Time, w *wan) (map[string]int, []queueBin) {
	var latest atomic.Pointer[pathSample]
	if w == nil || w.Bottleneck == 0 {
		return samplePaths(ctx, t, until, &latest), nil
	}
	done := make(chan []queueBin, 1)
	go func() { done <- sampleQueue(ctx, t, until, w.Delay, &latest) }()
	paths := samplePaths(ctx, t, until, &latest)
	return paths, <-done
}

// seriesInterval is iperf3's reporting interval (-i) under -series: the
// sender's window and retransmits in steps short enough to show a flow's
// start-up.
const seriesInterval = "0.25"

// writeSeries writes r's bins as DIR/queue-rROUND-IMPL-PLACEMENT-TEST.tsv
// (time s, drops, queue ms, path) and the sender's iperf3 intervals as
// DIR/iperf-rROUND-IMPL-PLACEMENT-TEST.tsv (from the flow's start, warm-up
// included: time s, Mbit/s, retransmits, cwnd KiB, RTT ms), for plotting;
// nothing without bins.
func writeSeries(dir string, r Record) error {
	if len(r.queueBins) == 0 {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s, round %d, %s, %s: A→B bottleneck queue in %s bins after the warm-up; full queue %.1f ms\n",
		r.Impl, r.Round, r.Placement, r.Test, binEvery, r.QueueDrops.CapacityMs)
	b.WriteString("t_s\tdrops\tqueue_ms\tpath\tdetail\n")
	for _, q := range r.queueBins {
		path := q.Path
		if path == "" {
			path = "-"
		}
		fmt.Fprintf(&b, "%.3f\t%d\t%.2f\t%s\t%s\n", q.At.Seconds(), q.Drops, q.QueueMs, path, q.Detail)
	}
	place := "unpinned"
	if r.Placement == placePinned {
		place = "pinned"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("-r%d-%s-%s-%s.tsv", r.Round, r.Impl, place, r.Test)
	if err := os.WriteFile(filepath.Join(dir, "queue"+name), b.Bytes(), 0o644); err != nil {
		return err
	}
	if len(r.intervals) == 0 {
		return nil
	}
	b.Reset()
	fmt.Fprintf(&b, "# %s, round %d, %s, %s: the iperf3 sender's intervals from the flow's start (warm-up marked)\n",
		r.Impl, r.Round, r.Placement, r.Test)
	b.WriteString("t_s\tmbps\tretransmits\tcwnd_kib\trtt_ms\twarmup\n")
	for _, iv := range r.intervals {
		fmt.Fprintf(&b, "%.2f\t%.1f\t%d\t%.0f\t%.1f\t%t\n", iv.Start, iv.Mbps, iv.Retransmits, iv.CwndKiB, iv.RTTms, iv.Omitted)
	}
	return os.WriteFile(filepath.Join(dir, "iperf"+name), b.Bytes(), 0o644)
}
