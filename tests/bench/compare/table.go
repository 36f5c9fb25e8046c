package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The two implementations and two placements, in table order.
const (
	implWG        = "wireguard-go"
	implYip       = "yip-router"
	placeUnpinned = "unpinned"
	placePinned   = "rx daemon alone on core 0"
)

// metric is one row of the table under a test.
type metric struct {
	name string
	unit string
	prec int
	kind testKind // which tests it applies to
	get  func(Record) float64
}

type testKind int

const (
	kindTCP testKind = 1 << iota
	kindUDP
	kindPing
	kindFlood // a TCP flow under a flood (flood.go; the unflooded one is kindTCP)
)

var metrics = []metric{
	{"goodput", "Gbit/s", 2, kindTCP | kindUDP | kindFlood, func(r Record) float64 { return r.RecvGbps }},
	{"goodput, same flood to a closed port (CPU-matched baseline)", "Gbit/s", 2, kindFlood, func(r Record) float64 { return r.MatchedGbps }},
	{"goodput under the flood / CPU-matched baseline", "", 2, kindFlood, Record.FloodVsMatched},
	{"goodput under the flood / unflooded", "", 2, kindFlood, Record.FloodVsUnflooded},
	{"CPU-matched baseline / unflooded", "", 2, kindFlood, Record.MatchedVsUnflooded},
	{"attacker datagrams sent under the flood", "", 0, kindFlood, func(r Record) float64 { return float64(r.FloodSent) }},
	{"attacker datagrams/s under the flood", "", 0, kindFlood, func(r Record) float64 { return r.FloodPPS }},
	{"attacker datagrams/s, CPU-matched baseline", "", 0, kindFlood, func(r Record) float64 { return r.MatchedPPS }},
	{"attacker rate under the flood / CPU-matched baseline", "", 2, kindFlood, Record.RateVsMatched},
	{"Gbit/s per receiving core", "Gbit/s", 2, kindTCP | kindUDP | kindFlood, Record.GbpsPerRxCore},
	{"receiving daemon CPU", "cores", 2, kindTCP | kindUDP | kindFlood, Record.RxCores},
	{"sending daemon CPU", "cores", 2, kindTCP | kindUDP | kindFlood, Record.TxCores},
	{"inner TCP RTT (sender's smoothed, mean)", "ms", 2, kindTCP | kindFlood, func(r Record) float64 { return r.TCPRTTms }},
	{"retransmits (iperf3)", "", 0, kindTCP | kindFlood, func(r Record) float64 { return float64(r.Retransmits) }},
	{"retransmitted segments", "%", 3, kindTCP | kindFlood, Record.RetransPct},
	{"UDP loss", "%", 2, kindUDP, func(r Record) float64 { return r.LostPct }},
	{"sending TUN TX dropped", "", 0, kindTCP | kindUDP | kindFlood, func(r Record) float64 { return float64(r.TunTxDropped) }},
	{"RTT median", "ms", 3, kindPing, func(r Record) float64 { return r.RTTMedianMs }},
	{"RTT mean", "ms", 3, kindPing, func(r Record) float64 { return r.RTTAvgMs }},
	{"ping loss", "%", 1, kindPing, func(r Record) float64 { return r.PingLossPct }},
}

// fecMetrics follow where yip-router's records have FEC counters
// (wireguard-go's cells show —).
var fecMetrics = []metric{
	{"FEC parity per other datagram sent", "%", 1, kindTCP | kindUDP | kindFlood, Record.FECParityPct},
	{"FEC parity per other datagram sent, after the warm-up", "%", 1, kindTCP | kindUDP | kindFlood, Record.FECSteadyParityPct},
	{"FEC parity per other datagram the receiver sent (ACKs), after the warm-up", "%", 1, kindTCP, Record.FECBackParityPct},
	{"FEC data symbols recovered", "", 0, kindTCP | kindUDP | kindFlood, Record.FECRecovered},
	{"FEC data symbols lost for good", "", 0, kindTCP | kindUDP | kindFlood, Record.FECUnrecovered},
	{"sender's path judged queued, drained or split (FEC adapter), share of samples after the warm-up", "%", 0, kindTCP | kindUDP | kindFlood, Record.PathQueuedPct},
}

// bridgeMetrics follow metrics where the records have the impairment
// bridge's counters (WAN runs).
var bridgeMetrics = []metric{
	{"WAN frames dropped A→B", "%", 2, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.BridgeDropPct(0) }},
	{"of which channel loss A→B", "%", 2, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.ChannelLossPct(0) }},
	{"WAN frames dropped B→A", "%", 2, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.BridgeDropPct(1) }},
	{"WAN delay A→B (propagation + queue), mean", "ms", 1, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.WANDelayMs(0) }},
	{"bridge overruns (buffers full)", "", 0, kindTCP | kindUDP | kindPing | kindFlood, Record.BridgeOverruns},
}

// bottleneckMetrics follow where the WAN had a bottleneck.
var bottleneckMetrics = []metric{
	{"goodput, share of the bottleneck", "%", 1, kindTCP | kindUDP | kindFlood, Record.LinkPct},
	{"bottleneck queue full, A→B (of frames reaching it)", "%", 2, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.QueueDropPct(0) }},
	{"bottleneck queue full, B→A (of frames reaching it)", "%", 2, kindTCP | kindUDP | kindPing | kindFlood, func(r Record) float64 { return r.QueueDropPct(1) }},
	{"queue-drop episodes A→B after the warm-up (runs of 100 ms bins with drops)", "", 0, kindTCP | kindUDP | kindFlood, Record.QueueDropEpisodes},
	{"100 ms bins with queue drops A→B after the warm-up", "", 0, kindTCP | kindUDP | kindFlood, Record.QueueDropBins},
	{"drops with the queue ≥ half full (this or the previous 100 ms)", "%", 0, kindTCP | kindUDP | kindFlood, Record.QueueDropsHalfFullPct},
	{"queue delay in the 100 ms bins with drops, median", "ms", 1, kindTCP | kindUDP | kindFlood, Record.DropBinQueueMs},
	{"drops while the sender's latest path sample was queued, drained or split", "%", 0, kindTCP | kindUDP | kindFlood, Record.QueueDropsPathQueuedPct},
}

func kindOf(test string) testKind {
	switch {
	case test == "flood-"+floodNone:
		return kindTCP
	case strings.HasPrefix(test, "flood-"):
		return kindFlood
	case strings.HasPrefix(test, "tcp"):
		return kindTCP
	case strings.HasPrefix(test, "udp"):
		return kindUDP
	default:
		return kindPing
	}
}

// median of xs (NaN-free); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Table renders the medians over rounds as one Markdown table: rows are
// test × placement × metric, columns wireguard-go, yip-router and their
// ratio. Failed runs (Err set) are left out of the medians and counted.
func Table(recs []Record, tests, placements []string) string {
	var b strings.Builder
	b.WriteString("| test | placement | metric | wireguard-go | yip-router | yip/wg |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, t := range tests {
		for _, p := range placements {
			vals := map[string][]Record{}
			fails := map[string]int{}
			for _, r := range recs {
				if r.Test != t || r.Placement != p {
					continue
				}
				if r.Err != "" {
					fails[r.Impl]++
					continue
				}
				vals[r.Impl] = append(vals[r.Impl], r)
			}
			if len(vals[implWG])+len(vals[implYip])+fails[implWG]+fails[implYip] == 0 {
				continue
			}
			ms := metrics
			if slices.ContainsFunc(vals[implYip], func(r Record) bool { return r.FEC != nil }) {
				ms = append(slices.Clip(ms), fecMetrics...)
			}
			if slices.ContainsFunc(slices.Concat(vals[implWG], vals[implYip]), func(r Record) bool { return r.Bridge != nil }) {
				ms = append(slices.Clip(ms), bridgeMetrics...)
			}
			if slices.ContainsFunc(slices.Concat(vals[implWG], vals[implYip]), func(r Record) bool { return r.LinkBps > 0 && r.Bridge != nil }) {
				ms = append(slices.Clip(ms), bottleneckMetrics...)
			}
			first := true
			for _, m := range ms {
				if m.kind&kindOf(t) == 0 {
					continue
				}
				tcol, pcol := "", ""
				if first {
					tcol, pcol = testTitle(t), p
					first = false
				}
				wg, wok := med(vals[implWG], m)
				yip, yok := med(vals[implYip], m)
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", tcol, pcol, m.name,
					cell(wg, wok, len(vals[implWG]), fails[implWG], m), cell(yip, yok, len(vals[implYip]), fails[implYip], m),
					ratio(wg, yip, wok && yok))
			}
		}
	}
	return b.String()
}

// med is the median of m over rs, leaving out records m does not apply to
// (NaN); ok is false when none is left.
func med(rs []Record, m metric) (float64, bool) {
	var xs []float64
	for _, r := range rs {
		if v := m.get(r); !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return median(xs), true
}

func cell(v float64, ok bool, n, fails int, m metric) string {
	if !ok {
		if n > 0 {
			return "—" // ran, but m does not apply
		}
		if fails == 0 {
			return "not run"
		}
		return fmt.Sprintf("failed ×%d", fails)
	}
	s := fmt.Sprintf("%.*f", m.prec, v)
	if m.unit != "" {
		s += " " + m.unit
	}
	if m.unit == "Gbit/s" && v > 0 && v < 0.1 {
		// Over a lossy long path a few Mbit/s would print as 0.00.
		s = fmt.Sprintf("%.1f Mbit/s", 1000*v)
	}
	if fails > 0 {
		s += fmt.Sprintf(" (%d of %d runs failed)", fails, n+fails)
	}
	return s
}

func ratio(wg, yip float64, ok bool) string {
	if !ok || wg == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", yip/wg)
}

// floodTitles spell the flood rows' tests.
var floodTitles = map[string]string{
	floodNone:    "TCP ×1, no flood",
	floodGarbage: "TCP ×1 under garbage",
	floodInit:    "TCP ×1 under spoofed initiations",
	floodReplay:  "TCP ×1 under replayed datagrams",
}

// testTitle spells a test name for the table.
func testTitle(t string) string {
	parts := strings.Split(t, "-")
	switch {
	case parts[0] == "tcp1":
		return "TCP ×1 " + strings.Join(parts[1:], " ")
	case parts[0] == "tcp4":
		return "TCP ×4 " + strings.Join(parts[1:], " ")
	case t == "udp-blast":
		return "UDP blast"
	case parts[0] == "udp":
		return "UDP " + strings.Join(parts[1:], " ") + "bit/s offered"
	case t == "ping":
		return "ping RTT"
	case parts[0] == "flood" && len(parts) == 2:
		if title, ok := floodTitles[parts[1]]; ok {
			return title
		}
	}
	return t
}
