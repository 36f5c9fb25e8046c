// Command compare is `make bench-compare`: yip-router and wireguard-go side
// by side on the same two-namespace veth setup, interleaved in one run,
// in two placements, with iperf3 and ping through each tunnel. With the
// WAN flags (-delay, -jitter, -loss, -ge-*) both implementations' links
// go through internal/impair's bridge in a middle namespace. It prints
// one table of medians over rounds (ratios yip/wg) and writes the raw
// results and the table under docs/bench/. Root only; see
// docs/BENCHMARKS.md ("yip-router against wireguard-go").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	yipconfig "github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/netns"
)

// config is the run's settings (flags).
type config struct {
	Rounds   int           `json:"rounds"`
	Duration time.Duration `json:"duration_ns"` // measured part of each iperf3 run
	Omit     time.Duration `json:"omit_ns"`     // iperf3 -O warm-up, not in the figures
	Rate     string        `json:"udp_rate"`
	UDPLen   int           `json:"udp_len"`
	CCs      []string      `json:"tcp_cc"`
	Pings    int           `json:"pings"`
	MTU      int           `json:"mtu"`    // yip-router's inner MTU
	WGMTU    int           `json:"wg_mtu"` // wireguard-go's
	YipFEC   string        `json:"yip_fec"`
	YipExtra string        `json:"yip_extra,omitempty"` // lines added to [Interface]
	Quick    bool          `json:"quick"`
	// TCPBuf is the ceiling of TCP buffer autotuning set in both
	// gateway namespaces (bytes; 0: the host's settings).
	TCPBuf int `json:"tcp_buf,omitempty"`
	// PingsFirst is how many pings, a second apart, go through the
	// tunnel before each iperf3 run (a user checking the tunnel before
	// a transfer).
	PingsFirst int `json:"pings_first,omitempty"`
	// Placement keeps one placement ("unpinned" or "pinned"; empty:
	// both).
	Placement string `json:"placement,omitempty"`
	// Tests are the name prefixes of the tests run (empty: all).
	Tests []string `json:"tests,omitempty"`
	// Floods are the flood rows' floods (flood.go; empty: no flood
	// rows).
	Floods []string `json:"floods,omitempty"`
	// WAN is the impairment both implementations run through; nil: a
	// direct veth link.
	WAN    *wan `json:"wan,omitempty"`
	yipBin string
	wgBin  string
	out    string
	commit string
	series string // -series: where the queue's bins go (queuedrops.go)
}

func main() {
	c := &config{MTU: yipconfig.DefaultMTU}
	// Each implementation at its own default MTU: wireguard-go's 1420
	// (its TUN default, and wg-quick's), yip-router's config.DefaultMTU.
	flag.IntVar(&c.WGMTU, "wg-mtu", wgDefaultMTU, "wireguard-go's inner MTU (default: its own default)")
	var secs, omit int
	var ccs, tcpBufFlag, tests, floods string
	flag.StringVar(&c.yipBin, "yip", "bin/yip-router", "yip-router binary")
	flag.StringVar(&c.wgBin, "wg", "bin/wireguard-go", "wireguard-go binary")
	flag.IntVar(&c.Rounds, "rounds", 3, "interleaved rounds (medians over them)")
	flag.IntVar(&secs, "duration", 8, "seconds measured per iperf3 run")
	flag.IntVar(&omit, "omit", 1, "seconds of iperf3 warm-up left out (-O)")
	flag.StringVar(&c.Rate, "rate", "", "offered rate of the fixed-rate UDP test (iperf3 -b; default 1G, or "+udpRateWAN+" with a WAN flag)")
	flag.IntVar(&c.UDPLen, "udp-len", 1360, "UDP datagram payload bytes (+28 must fit the inner MTU)")
	flag.StringVar(&ccs, "cc", "cubic,bbr", "inner TCP congestion controls, comma-separated (iperf3 -C)")
	flag.IntVar(&c.Pings, "pings", 200, "pings at 10 ms intervals")
	flag.IntVar(&c.PingsFirst, "pings-first", 0, "pings, 1 s apart, through the tunnel before each iperf3 run")
	flag.StringVar(&c.YipFEC, "fec", "auto", "yip-router FEC mode")
	flag.StringVar(&c.YipExtra, "yip-extra", "", "lines added to both yip-router configs' [Interface] (e.g. 'DisableOffload = all'; \\n separates lines)")
	flag.StringVar(&tcpBufFlag, "tcp-buf", "", "ceiling of the endpoints' TCP buffers (tcp_rmem/tcp_wmem max, e.g. 32M; 0: the host's; default 32M with a WAN flag, else 0)")
	flag.StringVar(&tests, "tests", "", "run only the tests whose names start with these, comma-separated (e.g. tcp1,udp-100M)")
	flag.StringVar(&floods, "floods", "", "add the flood rows: one TCP flow unflooded, and under each of these floods and its CPU-matched baseline, comma-separated: garbage, init, replay, or all (-tests flood keeps only them)")
	flag.StringVar(&c.Placement, "placement", "", "run one placement only: unpinned or pinned (default both)")
	flag.BoolVar(&c.Quick, "quick", false, "smoke test: 1 round, 3 s runs, 50 pings")
	flag.StringVar(&c.out, "out", "docs/bench", "directory for the results")
	flag.StringVar(&c.series, "series", "", "with -bottleneck: write each iperf3 run's A→B queue drops and delay in 100 ms bins to `DIR`/queue-rROUND-IMPL-PLACEMENT-TEST.tsv, and the sender's window and retransmits every 250 ms to DIR/iperf-rROUND-IMPL-PLACEMENT-TEST.tsv (a run overwrites the last one's)")
	flag.StringVar(&c.commit, "commit", "", "yip-router version to record (default: git describe)")
	w := addWANFlags(flag.CommandLine)
	flag.Parse()
	c.WAN = w.recorded()
	c.Rate = udpRate(c.Rate, c.WAN)
	c.CCs = strings.FieldsFunc(ccs, func(r rune) bool { return r == ',' || r == ' ' })
	c.Tests = strings.FieldsFunc(tests, func(r rune) bool { return r == ',' || r == ' ' })
	var err error
	if c.Floods, err = parseFloods(floods); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare: -floods", err)
		os.Exit(2)
	}
	if c.TCPBuf, err = tcpBuf(tcpBufFlag, c.WAN); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare: -tcp-buf", err)
		os.Exit(2)
	}
	if c.Quick {
		c.Rounds, secs, c.Pings = 1, 3, 50
	}
	c.Duration, c.Omit = time.Duration(secs)*time.Second, time.Duration(omit)*time.Second
	if err := check(c, secs); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(2)
	}
	if c.WAN != nil {
		fmt.Fprintf(os.Stderr, "WAN through the impairment bridge: %s; UDP test at %s\n", c.WAN, c.Rate)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	meta := newMeta(c)
	recs := run(ctx, c)
	if err := report(c, meta, recs, ctx.Err() != nil); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

func check(c *config, secs int) error {
	if err := netns.Available(); err != nil {
		return err
	}
	for _, tool := range []string{"iperf3", "wg", "ping", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not installed (make bench-compare installs iperf3, wireguard-tools, iputils-ping)", tool)
		}
	}
	for _, b := range []string{c.yipBin, c.wgBin} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%v (make bench-compare builds and installs both)", err)
		}
	}
	switch {
	case c.Rounds < 1:
		return fmt.Errorf("rounds %d: want at least 1", c.Rounds)
	case secs < 2:
		return fmt.Errorf("duration %d s: want at least 2 (the CPU window sits inside it)", secs)
	case c.UDPLen+28 > min(c.MTU, c.WGMTU):
		return fmt.Errorf("udp-len %d: %d bytes with headers exceed the inner MTU %d", c.UDPLen, c.UDPLen+28, min(c.MTU, c.WGMTU))
	case len(c.CCs) == 0:
		return fmt.Errorf("no congestion control given")
	case c.Placement != "" && c.Placement != "unpinned" && c.Placement != "pinned":
		return fmt.Errorf("placement %q: want unpinned or pinned", c.Placement)
	case len(placements(runtime.NumCPU(), c.Placement)) == 0:
		return fmt.Errorf("placement %q needs at least 2 CPUs", c.Placement)
	}
	if err := checkTests(c); err != nil {
		return err
	}
	if c.series != "" && (c.WAN == nil || c.WAN.Bottleneck == 0) {
		return fmt.Errorf("-series %s: the queue's bins need a -bottleneck", c.series)
	}
	if c.WAN != nil {
		return c.WAN.check()
	}
	return nil
}

// checkTests refuses a -tests selection of none (and says so when it
// names flood rows without -floods).
func checkTests(c *config) error {
	if len(c.Floods) == 0 && slices.ContainsFunc(c.Tests, func(p string) bool { return strings.HasPrefix(p, "flood") }) {
		return fmt.Errorf("-tests %s: the flood rows run only with -floods (e.g. -floods all)", strings.Join(c.Tests, ","))
	}
	_, err := selectTests(testSpecs(c), c.Tests)
	return err
}

// udpRate is the fixed-rate UDP test's offered rate: the -rate flag, or
// by default 1G on the direct link and udpRateWAN through the bridge.
func udpRate(flagged string, w *wan) string {
	switch {
	case flagged != "":
		return flagged
	case w != nil:
		return udpRateWAN
	}
	return "1G"
}

// run does all rounds; within a round each placement runs both
// implementations back to back, the order alternating between rounds.
func run(ctx context.Context, c *config) []Record {
	var recs []Record
	specs, _ := selectTests(testSpecs(c), c.Tests) // check has refused a selection of none
	impls := []string{implWG, implYip}
	for round := 1; round <= c.Rounds; round++ {
		for _, p := range placements(runtime.NumCPU(), c.Placement) {
			for k := range impls {
				impl := impls[(k+round+1)%2]
				if ctx.Err() != nil {
					return recs
				}
				recs = append(recs, runImpl(ctx, c, round, impl, p, specs)...)
			}
		}
	}
	return recs
}

func runImpl(ctx context.Context, c *config, round int, impl string, p placement, specs []testSpec) []Record {
	var t topology
	var err error
	var imp *impair.Config
	if c.WAN != nil {
		imp = c.WAN.config(round)
	}
	if impl == implWG {
		t, err = newWG(c.wgBin, c.WGMTU, p.daemons, imp)
	} else {
		t, err = newYip(c.yipBin, c.YipFEC, strings.ReplaceAll(c.YipExtra, `\n`, "\n"), p.daemons, imp)
	}
	if err == nil {
		if err = tuneTCP(t, c.TCPBuf); err != nil {
			t.Close()
		}
	}
	var recs []Record
	if err != nil {
		fmt.Fprintf(os.Stderr, "round %d  %-26s %-13s setup failed: %v\n", round, p.name, impl, err)
		for _, s := range specs {
			recs = append(recs, Record{Round: round, Impl: impl, Placement: p.name, Test: s.name, Err: "setup: " + err.Error()})
		}
		return recs
	}
	defer t.Close()
	// The flood rows' attacker, attached at the first flood (so the
	// other tests run without it) and removed before the topology.
	var rig *floodRig
	var rigErr error
	defer func() {
		if rig != nil {
			rig.Close()
		}
	}()
	var unflooded float64 // the flood rows' unflooded flow in this topology
	for _, s := range specs {
		if ctx.Err() != nil {
			break
		}
		if s.attacked() && rig == nil && rigErr == nil {
			rig, rigErr = newFloodRig(t, p)
		}
		var r Record
		if s.attacked() && rigErr != nil {
			r = Record{Flood: s.flood, Err: "attacker setup: " + rigErr.Error()}
		} else {
			r = runTest(ctx, c, t, p, s, rig)
		}
		if ctx.Err() != nil {
			break // interrupted: the run is not a result
		}
		switch {
		case s.flood == floodNone && r.Err == "":
			unflooded = r.RecvGbps
		case s.attacked():
			r.UnfloodedGbps = unflooded
		}
		r.Round, r.Impl, r.Placement, r.Test = round, impl, p.name, s.name
		if c.WAN != nil {
			r.LinkBps = c.WAN.Bottleneck
		}
		fmt.Fprintf(os.Stderr, "round %d  %-26s %-13s %-11s %s\n", round, p.name, impl, s.name, summary(r))
		if c.series != "" {
			if err := writeSeries(c.series, r); err != nil {
				fmt.Fprintln(os.Stderr, "bench-compare: -series:", err)
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// summary is a progress line for one record.
func summary(r Record) string {
	s := summary1(r)
	if r.Bridge != nil && r.Err == "" {
		s += fmt.Sprintf("; WAN dropped %.2f%% A→B, %.2f%% B→A, %.0f bridge overruns", r.BridgeDropPct(0), r.BridgeDropPct(1), r.BridgeOverruns())
	}
	if q := r.QueueDrops; q != nil && r.Err == "" {
		s += fmt.Sprintf("; queue drops %d in %d episodes (%d of %d bins), %.0f%% with the queue ≥ half full",
			q.Drops, q.Episodes, q.DropBins, q.Bins, r.QueueDropsHalfFullPct())
	}
	return s
}

func summary1(r Record) string {
	switch {
	case r.Err != "":
		return "FAILED: " + r.Err
	case r.flooded():
		return fmt.Sprintf("%.2f Gbit/s under the flood (attacker %.0f datagrams/s), %.2f Gbit/s under the CPU-matched baseline (%.0f/s): %.2f of it; rx CPU %.2f, tx CPU %.2f",
			r.RecvGbps, r.FloodPPS, r.MatchedGbps, r.MatchedPPS, r.FloodVsMatched(), r.RxCores(), r.TxCores())
	case r.RTTMedianMs > 0:
		return fmt.Sprintf("RTT median %.3f ms, mean %.3f ms, loss %.1f%%", r.RTTMedianMs, r.RTTAvgMs, r.PingLossPct)
	case kindOf(r.Test) == kindUDP:
		return fmt.Sprintf("%.2f Gbit/s delivered (%.2f sent), %.2f%% lost, rx CPU %.2f, tx CPU %.2f, %.2f Gbit/s per rx core, TUN TX drops %d",
			r.RecvGbps, r.SentGbps, r.LostPct, r.RxCores(), r.TxCores(), r.GbpsPerRxCore(), r.TunTxDropped)
	default:
		return fmt.Sprintf("%.2f Gbit/s, %d retransmits (%.3f%% of segments), rx CPU %.2f, tx CPU %.2f, %.2f Gbit/s per rx core, TUN TX drops %d",
			r.RecvGbps, r.Retransmits, r.RetransPct(), r.RxCores(), r.TxCores(), r.GbpsPerRxCore(), r.TunTxDropped)
	}
}
