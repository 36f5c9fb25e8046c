package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/router"
)

// queueSeries is a synthetic run against a 50 ms queue (half full: 25
// ms): three episodes, the last across a bin where no frame passed.
var queueSeries = []queueBin{
	{Drops: 0, QueueMs: 10},
	{Drops: 3, QueueMs: 30},                    // episode 1, half full
	{Drops: 2, QueueMs: 20, Path: "clear"},     // half full the bin before
	{Drops: 0, QueueMs: 5, Path: "clear"},      //
	{Drops: 4, QueueMs: 10, Path: "queued"},    // episode 2, not half full
	{Drops: 0, QueueMs: math.NaN()},            // no frame passed
	{Drops: 1, QueueMs: 25, Path: "drained"},   // episode 3, exactly half
	{Drops: 5, QueueMs: math.NaN(), Path: "x"}, // half full the bin before
}

func TestSummarizeQueue(t *testing.T) {
	q := summarizeQueue(queueSeries, 50)
	want := queueDrops{Bins: 8, DropBins: 5, Episodes: 3, Drops: 15, CapacityMs: 50, HalfFull: 3 + 2 + 1 + 5,
		QueueMeanMs: 100.0 / 6, QueueMaxMs: 30, DropQueueMedMs: 22.5, PathSeen: 2 + 4 + 1 + 5, PathQueued: 4 + 1}
	if q == nil || math.Abs(q.QueueMeanMs-want.QueueMeanMs) > 1e-9 {
		t.Fatalf("got %+v, want %+v", q, want)
	}
	q.QueueMeanMs = want.QueueMeanMs
	if *q != want {
		t.Fatalf("got %+v, want %+v", *q, want)
	}
	r := Record{QueueDrops: q}
	for name, c := range map[string]struct{ got, want float64 }{
		"episodes":              {r.QueueDropEpisodes(), 3},
		"drop bins":             {r.QueueDropBins(), 5},
		"half full %":           {r.QueueDropsHalfFullPct(), 100 * 11.0 / 15},
		"drop bins' queue":      {r.DropBinQueueMs(), 22.5},
		"path queued/drained %": {r.QueueDropsPathQueuedPct(), 100 * 5.0 / 12},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}

	// Drops in the first bin start an episode; there is no bin before it.
	if q := summarizeQueue([]queueBin{{Drops: 2, QueueMs: 10}, {Drops: 1, QueueMs: 30}}, 50); q.Episodes != 1 || q.HalfFull != 1 {
		t.Errorf("drops from the first bin: %+v, want 1 episode, 1 drop half full", q)
	}
}

// No bins (no bottleneck) is no summary, and every share a dash; bins
// without drops count zero episodes, and the shares of drops a dash.
func TestSummarizeQueueEmpty(t *testing.T) {
	if q := summarizeQueue(nil, 50); q != nil {
		t.Fatalf("no bins: %+v, want nil", q)
	}
	none := Record{}
	quiet := Record{QueueDrops: summarizeQueue([]queueBin{{QueueMs: 3}, {QueueMs: 5}}, 50)}
	if quiet.QueueDrops.Bins != 2 || quiet.QueueDropEpisodes() != 0 || quiet.QueueDrops.QueueMaxMs != 5 {
		t.Errorf("quiet run: %+v", quiet.QueueDrops)
	}
	for _, f := range []func(Record) float64{Record.QueueDropEpisodes, Record.QueueDropBins, Record.QueueDropsHalfFullPct,
		Record.DropBinQueueMs, Record.QueueDropsPathQueuedPct} {
		if v := f(none); !math.IsNaN(v) {
			t.Errorf("no summary: %v, want NaN", v)
		}
	}
	for _, f := range []func(Record) float64{Record.QueueDropsHalfFullPct, Record.DropBinQueueMs, Record.QueueDropsPathQueuedPct} {
		if v := f(quiet); !math.IsNaN(v) {
			t.Errorf("no drops: %v, want NaN", v)
		}
	}
	raw, _ := json.Marshal(none)
	if strings.Contains(string(raw), "queue_drops") {
		t.Errorf("JSON without a bottleneck has queue_drops: %s", raw)
	}
	raw, _ = json.Marshal(Record{QueueDrops: summarizeQueue(queueSeries, 50), queueBins: queueSeries})
	if want := `"queue_drops":{"bins":8,"drop_bins":5,"episodes":3,"drops":15,"capacity_ms":50,"drops_half_full":11,`; !strings.Contains(string(raw), want) {
		t.Errorf("JSON lacks %s: %s", want, raw)
	}
}

// A bin's queue delay is its frames' mean time in the bridge less the
// propagation delay.
func TestQueueBinOf(t *testing.T) {
	from := impair.Stats{Delayed: 100, DelayNs: 100 * 25e6, DropRate: 3}
	to := impair.Stats{Delayed: 110, DelayNs: 100*25e6 + 10*32e6, DropRate: 5}
	if b := queueBinOf(from, to, 25*time.Millisecond); b.Drops != 2 || math.Abs(b.QueueMs-7) > 1e-9 {
		t.Errorf("got %+v, want 2 drops, 7 ms", b)
	}
	if b := queueBinOf(from, from, 25*time.Millisecond); b.Drops != 0 || !math.IsNaN(b.QueueMs) {
		t.Errorf("no frames: %+v, want NaN", b)
	}
}

// The full queue's delay is queue bytes over the rate: one BDP of a 25 ms
// path is 50 ms.
func TestQueueTime(t *testing.T) {
	if got := (&wan{Delay: 25 * time.Millisecond, Bottleneck: 200e6}).queueTime(); got != 50*time.Millisecond {
		t.Errorf("queueTime %s, want 50ms", got)
	}
	if got := (&wan{Delay: 25 * time.Millisecond}).queueTime(); got != 0 {
		t.Errorf("no bottleneck: %s, want 0", got)
	}
}

// queueTopo is a sender (pathTopo) behind a bridge whose A→B counters go
// up by script, one step a reading, then stay.
type queueTopo struct {
	pathTopo
	steps []impair.Stats
	cur   impair.Stats
}

func (q *queueTopo) Bridge() ([2]impair.Stats, bool) {
	if len(q.steps) > 0 {
		s := q.steps[0]
		q.steps = q.steps[1:]
		q.cur.Delayed += s.Delayed
		q.cur.DelayNs += s.DelayNs
		q.cur.DropRate += s.DropRate
	}
	return [2]impair.Stats{q.cur}, true
}

// sampleSteady bins the bridge beside the sender's path samples: each bin
// carries the latest (the first is read at once, the second 250 ms on);
// without a bottleneck it bins nothing.
func TestSampleSteady(t *testing.T) {
	q := &queueTopo{pathTopo: pathTopo{script: []string{"queued"}}, steps: []impair.Stats{
		{Delayed: 7, DelayNs: 7 * 25e6}, // before the window
		{Delayed: 10, DelayNs: 10 * 30e6, DropRate: 2},
		{},
		{Delayed: 4, DelayNs: 4 * 45e6, DropRate: 1},
	}}
	w := &wan{Delay: 25 * time.Millisecond, Bottleneck: 200e6}
	paths, bins := sampleSteady(context.Background(), q, time.Now().Add(4*binEvery+binEvery/2), w)
	if paths["queued"] != 1 || paths["clear"] < 1 {
		t.Errorf("path samples %v, want queued then clear", paths)
	}
	if len(bins) != 4 {
		t.Fatalf("%d bins, want 4: %+v", len(bins), bins)
	}
	if b := bins[0]; b.Drops != 2 || math.Abs(b.QueueMs-5) > 1e-9 || b.Path != "queued" || b.At < binEvery {
		t.Errorf("bin 0: %+v, want 2 drops, 5 ms, queued", b)
	}
	if b := bins[1]; b.Drops != 0 || !math.IsNaN(b.QueueMs) {
		t.Errorf("bin 1: %+v, want no frames", b)
	}
	if b := bins[2]; b.Drops != 1 || math.Abs(b.QueueMs-20) > 1e-9 {
		t.Errorf("bin 2: %+v, want 1 drop, 20 ms", b)
	}
	if b := bins[3]; b.Path != "clear" || b.At < 4*binEvery {
		t.Errorf("bin 3: %+v, want clear", b)
	}
	if _, bins := sampleSteady(context.Background(), &pathTopo{}, time.Now().Add(2*binEvery), &wan{Delay: 25 * time.Millisecond}); bins != nil {
		t.Errorf("no bottleneck: bins %+v", bins)
	}
}

// -series writes one TSV per run with bins, none without.
func TestWriteSeries(t *testing.T) {
	dir := t.TempDir()
	bins := slices.Clone(queueSeries[:3])
	bins[0].At = binEvery
	bins[2].Detail = "rtt 60.0 least 52.0 fec 192:10 loss 0.50%"
	r := Record{Round: 2, Impl: implYip, Placement: placePinned, Test: "tcp1-cubic",
		QueueDrops: summarizeQueue(bins, 50), queueBins: bins,
		intervals: []iperfInterval{{Start: 0.25, Mbps: 167.75, Retransmits: 3, CwndKiB: 1529.4, RTTms: 76.21, Omitted: true}}}
	if err := writeSeries(dir, r); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "queue-r2-yip-router-pinned-tcp1-cubic.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(got), "\n")
	if len(lines) != 6 || lines[1] != "t_s\tdrops\tqueue_ms\tpath\tdetail" || lines[2] != "0.100\t0\t10.00\t-\t" ||
		lines[4] != "0.000\t2\t20.00\tclear\trtt 60.0 least 52.0 fec 192:10 loss 0.50%" {
		t.Errorf("series:\n%s", got)
	}
	got, err = os.ReadFile(filepath.Join(dir, "iperf-r2-yip-router-pinned-tcp1-cubic.tsv"))
	if lines := strings.Split(string(got), "\n"); err != nil || len(lines) != 4 || lines[2] != "0.25\t167.8\t3\t1529\t76.2\ttrue" {
		t.Errorf("intervals (%v):\n%s", err, got)
	}
	if err := writeSeries(filepath.Join(dir, "none"), Record{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none")); err == nil {
		t.Error("a run without bins made a directory")
	}
}

func TestRxFEC(t *testing.T) {
	st := &router.Status{
		Shards: []router.ShardStatus{
			{Counters: map[string]uint64{"fec_recovered": 10, "fec_evicted": 1}},
			{Counters: map[string]uint64{"fec_recovered": 5, "fec_not_stored": 7}},
		},
		Peers: []router.PeerStatus{{FECLost: 3}, {FECLost: 4}},
	}
	if got, want := rxFEC(st), "rx recovered 15 lost 7 evicted 1 not_stored 7"; got != want {
		t.Errorf("rxFEC = %q, want %q", got, want)
	}
}
