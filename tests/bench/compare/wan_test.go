package main

import (
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/benchenv"
	"github.com/yip-router/yip-router/internal/impair"
)

func parseWAN(t *testing.T, args ...string) *wan {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	w := addWANFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWANFlagsToConfig(t *testing.T) {
	if w := parseWAN(t); w.active() {
		t.Fatalf("no flags: active %+v", w)
	}
	if w := parseWAN(t, "-ge-bad", "0.5", "-seed", "3"); w.active() {
		t.Fatalf("ge-bad and seed alone impair nothing, but active: %+v", w)
	}
	w := parseWAN(t, "-delay", "25ms", "-jitter", "2ms", "-loss", "0.01", "-ge-burst", "4", "-ge-rate", "0.005", "-seed", "7")
	if !w.active() || w.check() != nil {
		t.Fatalf("active %v, check %v", w.active(), w.check())
	}
	for round, seed := range map[int]uint64{1: 7, 3: 9} {
		c := w.config(round)
		g := impair.BurstLoss(1, 4, 0.005)
		want := impair.Direction{Delay: 25 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 0.01, Burst: &g, Seed: seed}
		for i, d := range c.Dir {
			if d.Burst == nil || *d.Burst != g {
				t.Fatalf("round %d dir %d: burst %+v, want %+v", round, i, d.Burst, g)
			}
			d.Burst = want.Burst
			if i == 0 && d != want {
				t.Errorf("round %d A→B: %+v, want %+v", round, d, want)
			}
			if i == 1 {
				if d.Seed == want.Seed {
					t.Errorf("round %d: both directions seeded %d", round, d.Seed)
				}
				d.Seed = want.Seed
				if d != want {
					t.Errorf("round %d B→A: %+v, want %+v (seed aside)", round, d, want)
				}
			}
		}
		if c.Slots != 0 {
			t.Errorf("slots %d, want the bridge's default", c.Slots)
		}
	}
	if d := parseWAN(t, "-loss", "0.02").config(1).Dir[0]; d.Burst != nil || d.Loss != 0.02 || d.Delay != 0 {
		t.Errorf("loss only: %+v", d)
	}
}

// -bottleneck sets the rate limit in bytes/s in both directions, behind
// a queue of one bandwidth-delay product unless -queue says otherwise.
func TestWANBottleneck(t *testing.T) {
	w := parseWAN(t, "-delay", "25ms", "-bottleneck", "200M")
	if !w.active() || w.check() != nil {
		t.Fatalf("active %v, check %v", w.active(), w.check())
	}
	for i, d := range w.config(2).Dir {
		if d.Rate != 25e6 || d.QueueBytes != 1250000 {
			t.Errorf("dir %d: rate %d B/s, queue %d B; want 25e6 and one BDP (1250000)", i, d.Rate, d.QueueBytes)
		}
	}
	if q := parseWAN(t, "-bottleneck", "10M").queueBytes(); q != minQueue {
		t.Errorf("no delay: queue %d, want the floor %d", q, minQueue)
	}
	if q := parseWAN(t, "-delay", "25ms", "-bottleneck", "1.5G", "-queue", "300000").config(1).Dir[1].QueueBytes; q != 300000 {
		t.Errorf("-queue 300000: %d", q)
	}
	if d := parseWAN(t, "-bottleneck", "1.5G").config(1).Dir[0]; d.Rate != 1.5e9/8 {
		t.Errorf("1.5G: %d B/s", d.Rate)
	}
	if r := parseWAN(t, "-delay", "25ms", "-bottleneck", "200M").recorded(); r.Queue != 1250000 || r.Bottleneck != 200e6 {
		t.Errorf("recorded %+v: want the queue it ran with", r)
	}
	if got, want := w.String(), "25ms one-way delay, a 200 Mbit/s bottleneck with a 1220 KiB tail-drop queue (after the loss) in each direction"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addWANFlags(fs)
	for _, bad := range []string{"fast", "-5M", "2X", "NaN", "1e30", "Inf"} {
		if fs.Parse([]string{"-bottleneck", bad}) == nil {
			t.Errorf("-bottleneck %s accepted", bad)
		}
	}
}

func TestWANCheck(t *testing.T) {
	for _, args := range [][]string{
		{"-loss", "1"},
		{"-loss", "-0.1"},
		{"-delay", "-1ms"},
		{"-ge-burst", "0.5", "-ge-rate", "0.01"},
		{"-ge-burst", "3"},
		{"-ge-burst", "3", "-ge-rate", "0.5", "-ge-bad", "0.4"},
		{"-ge-burst", "3", "-ge-rate", "0.01", "-ge-bad", "1.5"},
		{"-bottleneck", "500k"},
		{"-bottleneck", "10M", "-queue", "1000"},
		{"-loss", "0.01", "-queue", "-1"},
		{"-delay", "25ms", "-queue", "100000"},
	} {
		if err := parseWAN(t, args...).check(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if err := parseWAN(t, "-ge-burst", "3", "-ge-rate", "0.01", "-ge-bad", "0.5").check(); err != nil {
		t.Error(err)
	}
}

func TestUDPRate(t *testing.T) {
	w := parseWAN(t, "-delay", "25ms")
	for _, c := range []struct {
		flag string
		w    *wan
		want string
	}{{"", nil, "1G"}, {"", w, udpRateWAN}, {"2G", nil, "2G"}, {"300M", w, "300M"}} {
		if got := udpRate(c.flag, c.w); got != c.want {
			t.Errorf("udpRate(%q, %v) = %q, want %q", c.flag, c.w, got, c.want)
		}
	}
}

func TestWANString(t *testing.T) {
	for args, want := range map[string]string{
		"-delay 25ms -loss 0.01":                 "25ms one-way delay, 1% random loss in each direction",
		"-jitter 1ms -ge-burst 3 -ge-rate 0.005": "±1ms jitter, Gilbert–Elliott burst loss (0.5% stationary, mean burst 3 frames, 100% lost in the bad state) in each direction",
		"":                                       "none",
	} {
		if got := parseWAN(t, strings.Fields(args)...).String(); got != want {
			t.Errorf("%q: %q, want %q", args, got, want)
		}
	}
}

func testMeta(c *config) *meta {
	return &meta{Started: time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC), Config: c, WGVersion: "wireguard-go v0.0.20250522", Iperf3: "iperf 3.18",
		Host: benchenv.Host{Commit: "abc123", Kernel: "6.18", CPUs: 2, CPUModel: "EPYC"}}
}

func TestHeader(t *testing.T) {
	c := &config{Rounds: 3, Duration: 8 * time.Second, Omit: time.Second, MTU: 1410, WGMTU: wgDefaultMTU, UDPLen: 1360, Pings: 200, YipFEC: "auto"}
	h := header(c, testMeta(c))
	if strings.Contains(h, "WAN") || !strings.HasSuffix(h, "200 pings at 10 ms.\n\n") {
		t.Errorf("header without WAN:\n%s", h)
	}
	c.WAN = parseWAN(t, "-delay", "25ms", "-loss", "0.01", "-seed", "5")
	c.Quick = true
	h = header(c, testMeta(c))
	for _, want := range []string{
		"# bench-compare 2026-12-01 10:30\n",
		"yip-router abc123 (FEC auto) vs wireguard-go v0.0.20250522;",
		"200 pings at 10 ms. QUICK (smoke test: not a measurement).\n",
		"\nWAN: 25ms one-way delay, 1% random loss in each direction; both implementations' gateways on one segment through internal/impair's bridge in a middle namespace (offloads off on the bridged links; round n seeded 5+n−1).\n",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
}

// The JSON results carry the impairment in meta.config.wan, and each run's
// bridge counters.
func TestWANRecorded(t *testing.T) {
	c := &config{Rounds: 1, WAN: parseWAN(t, "-delay", "25ms", "-ge-burst", "3", "-ge-rate", "0.01")}
	r := Record{Test: "ping", Bridge: bridgeDelta(
		[2]impair.Stats{{Seen: 10, Delayed: 10, DelayNs: 250e6}, {}},
		[2]impair.Stats{{Seen: 110, Sent: 95, Delayed: 98, DelayNs: 250e6 + 88*25e6, DropLoss: 2, DropBurst: 3, DropFull: 4, DropSend: 1}, {Seen: 50, Sent: 50, Delayed: 50, DelayNs: 50 * 25e6}})}
	raw, err := json.Marshal(struct {
		Meta    *meta    `json:"meta"`
		Records []Record `json:"records"`
	}{testMeta(c), []Record{r, {Test: "ping"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"wan":{"delay_ns":25000000,"ge_bad":1,"ge_burst":3,"ge_rate":0.01,"seed":1}`,
		`"bridge":[{"seen":100,"sent":95,"drop_loss":2,"drop_burst":3,"drop_full":4,"drop_other":1,"mean_delay_ms":25},{"seen":50,"sent":50,"drop_loss":0,"drop_burst":0,"drop_full":0,"drop_other":0,"mean_delay_ms":25}]`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON lacks %s:\n%s", want, raw)
		}
	}
	if strings.Count(string(raw), `"bridge"`) != 1 {
		t.Errorf("a record without a bridge has bridge counters:\n%s", raw)
	}
	if got := r.BridgeDropPct(0); !near(got, 10) {
		t.Errorf("drop %% A→B = %v, want 10", got)
	}
	if got := r.BridgeOverruns(); got != 4 {
		t.Errorf("overruns %v, want 4", got)
	}
	if w := parseWAN(t, "-ge-bad", "0.5").recorded(); w != nil {
		t.Errorf("no impairment recorded as %+v", w)
	}
	raw, _ = json.Marshal(&config{Rounds: 1, WAN: parseWAN(t).recorded()})
	if strings.Contains(string(raw), "wan") {
		t.Errorf("config without WAN: %s", raw)
	}
	raw, _ = json.Marshal(&config{Rounds: 1, WAN: parseWAN(t, "-loss", "0.01").recorded()})
	if want := `"wan":{"delay_ns":0,"loss":0.01,"seed":1}`; !strings.Contains(string(raw), want) {
		t.Errorf("JSON lacks %s: %s", want, raw)
	}
}

func TestTableBridgeRows(t *testing.T) {
	b := bridgeDelta([2]impair.Stats{}, [2]impair.Stats{{Seen: 200, DropLoss: 2}, {Seen: 100, DropFull: 3}})
	recs := []Record{
		{Round: 1, Impl: implWG, Placement: placeUnpinned, Test: "ping", RTTMedianMs: 50.5, Bridge: b},
		{Round: 1, Impl: implYip, Placement: placeUnpinned, Test: "ping", RTTMedianMs: 50.2, Bridge: b},
		{Round: 1, Impl: implYip, Placement: placePinned, Test: "ping", RTTMedianMs: 50.2},
		{Round: 1, Impl: implWG, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: 0.0026, Bridge: b},
		{Round: 1, Impl: implYip, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: 0.24, Bridge: b},
	}
	tab := Table(recs, []string{"tcp1-cubic", "ping"}, []string{placeUnpinned, placePinned})
	for _, want := range []string{
		"|  |  | WAN frames dropped A→B | 1.00 % | 1.00 % | 1.00× |",
		"|  |  | WAN frames dropped B→A | 3.00 % | 3.00 % | 1.00× |",
		"|  |  | bridge overruns (buffers full) | 3 | 3 | 1.00× |",
		"| TCP ×1 cubic | unpinned | goodput | 2.6 Mbit/s | 0.24 Gbit/s | 92.31× |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if n := strings.Count(tab, "WAN frames dropped A→B"); n != 2 {
		t.Errorf("%d bridge rows, want 2 (the pinned records have no bridge):\n%s", n, tab)
	}
	if strings.Contains(tab, "bottleneck") || strings.Contains(tab, "100 ms") {
		t.Errorf("bottleneck rows without a bottleneck:\n%s", tab)
	}
}

// With a bottleneck, goodput is also a share of the link, and queue drops
// are told apart from the channel's loss.
func TestTableBottleneckRows(t *testing.T) {
	b := bridgeDelta([2]impair.Stats{}, [2]impair.Stats{{Seen: 1000, DropLoss: 50, DropRate: 10, Delayed: 940, DelayNs: 940 * 30e6}, {Seen: 400, DropRate: 4}})
	wgQ, yipQ := *summarizeQueue(queueSeries, 50), *summarizeQueue(queueSeries, 50)
	wgQ.PathSeen, wgQ.PathQueued = 0, 0 // no path state
	yipQ.Episodes, yipQ.DropBins = 6, 10
	recs := []Record{
		{Round: 1, Impl: implWG, Placement: placeUnpinned, Test: "tcp1-bbr", RecvGbps: 0.135, TCPRTTms: 54, LinkBps: 200e6, Bridge: b, QueueDrops: &wgQ},
		{Round: 1, Impl: implYip, Placement: placeUnpinned, Test: "tcp1-bbr", RecvGbps: 0.170, TCPRTTms: 81, LinkBps: 200e6, Bridge: b, QueueDrops: &yipQ},
	}
	tab := Table(recs, []string{"tcp1-bbr"}, []string{placeUnpinned})
	for _, want := range []string{
		"|  |  | queue-drop episodes A→B after the warm-up (runs of 100 ms bins with drops) | 3 | 6 | 2.00× |",
		"|  |  | 100 ms bins with queue drops A→B after the warm-up | 5 | 10 | 2.00× |",
		"|  |  | drops with the queue ≥ half full (this or the previous 100 ms) | 73 % | 73 % | 1.00× |",
		"|  |  | queue delay in the 100 ms bins with drops, median | 22.5 ms | 22.5 ms | 1.00× |",
		"|  |  | drops while the sender's latest path sample was queued, drained or split | — | 42 % | — |",
		"|  |  | inner TCP RTT (sender's smoothed, mean) | 54.00 ms | 81.00 ms | 1.50× |",
		"|  |  | goodput, share of the bottleneck | 67.5 % | 85.0 % | 1.26× |",
		"|  |  | WAN frames dropped A→B | 6.00 % | 6.00 % | 1.00× |",
		"|  |  | of which channel loss A→B | 5.00 % | 5.00 % | 1.00× |",
		"|  |  | bottleneck queue full, A→B (of frames reaching it) | 1.05 % | 1.05 % | 1.00× |",
		"|  |  | bottleneck queue full, B→A (of frames reaching it) | 1.00 % | 1.00 % | 1.00× |",
		"|  |  | WAN delay A→B (propagation + queue), mean | 30.0 ms | 30.0 ms | 1.00× |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// yip-router's FEC counters get rows of their own; wireguard-go's cells
// in them say it does not apply.
func TestTableFECRows(t *testing.T) {
	f := &fecStats{ParityOut: 250, UDPOut: 1250, Recovered: 40, Unrecovered: 2}
	recs := []Record{
		{Round: 1, Impl: implWG, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: 0.2},
		{Round: 1, Impl: implYip, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: 0.4, FEC: f},
	}
	tab := Table(recs, []string{"tcp1-cubic"}, []string{placeUnpinned})
	for _, want := range []string{
		"|  |  | FEC parity per other datagram sent | — | 25.0 % | — |",
		"|  |  | FEC data symbols recovered | — | 40 | — |",
		"|  |  | FEC data symbols lost for good | — | 2 | — |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if strings.Contains(Table(recs[:1], []string{"tcp1-cubic"}, []string{placeUnpinned}), "FEC") {
		t.Error("FEC rows without FEC counters")
	}
}
