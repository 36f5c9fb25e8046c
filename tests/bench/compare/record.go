package main

import "math"

// Record is one test of one implementation in one placement and round: the
// unit of the raw results file. Zero fields do not apply to the test.
type Record struct {
	Round     int    `json:"round"`
	Impl      string `json:"impl"`      // implWG or implYip
	Placement string `json:"placement"` // placeUnpinned or placePinned
	Test      string `json:"test"`      // e.g. "tcp1-cubic", "udp-1G", "ping"
	Err       string `json:"error,omitempty"`

	// iperf3 (receiver side unless noted).
	RecvGbps    float64 `json:"recv_gbps,omitempty"`
	SentGbps    float64 `json:"sent_gbps,omitempty"`   // sender side
	Retransmits int64   `json:"retransmits,omitempty"` // sender's TCP count
	LostPct     float64 `json:"lost_pct,omitempty"`    // UDP, from bytes sent and received
	IperfLost   float64 `json:"iperf3_lost_pct,omitempty"`
	CC          string  `json:"cc,omitempty"` // TCP congestion control used
	// TCPRTTms is the inner TCP flows' mean smoothed RTT (sender side).
	TCPRTTms float64 `json:"tcp_rtt_ms,omitempty"`
	// LinkBps is the WAN bottleneck's rate (0: none), for goodput as a
	// share of the link.
	LinkBps int64 `json:"link_bps,omitempty"`

	// Daemons' CPU time (utime+stime from /proc/PID/stat) over a steady
	// window inside the measured part of the run.
	WindowSec float64 `json:"window_s,omitempty"`
	RxCPUSec  float64 `json:"rx_cpu_s,omitempty"`
	TxCPUSec  float64 `json:"tx_cpu_s,omitempty"`

	// Kernel counters, after minus before the run: the sending TUN
	// device's TX dropped; TCP segments sent and retransmitted in the
	// sending namespace; UDP receive-buffer errors in the receiving one.
	TunTxDropped  uint64 `json:"tun_tx_dropped"`
	TCPOutSegs    uint64 `json:"tcp_out_segs,omitempty"`
	TCPRetransSeg uint64 `json:"tcp_retrans_segs,omitempty"`
	UDPRcvbufErrs uint64 `json:"udp_rcvbuf_errors"`
	TunTxQLen     int    `json:"tun_txqueuelen"` // the sending TUN device's

	// Ping.
	RTTMedianMs float64 `json:"rtt_median_ms,omitempty"`
	RTTAvgMs    float64 `json:"rtt_avg_ms,omitempty"`
	PingLossPct float64 `json:"ping_loss_pct,omitempty"`

	// The impairment bridge's counters (WAN flags only), after minus
	// before the run (warm-up included): [0] A to B (the data
	// direction), [1] B to A.
	Bridge []bridgeStats `json:"bridge,omitempty"`

	// Flood rows (flood.go). Flood is the flood the flow ran under
	// (floodNone: the unflooded flow; empty: not a flood row). Under a
	// flood the iperf3, CPU and kernel figures above are the flooded
	// run's; FloodSent is how many datagrams the attacker got out during
	// it (floodLead before the flow included) and FloodPPS their rate.
	// Matched* are the CPU-matched baseline's: the same flow while the
	// same generator sent the same packets to a closed port.
	// UnfloodedGbps is the unflooded flow's goodput in the same topology
	// (0: not measured). FloodPackets is how many distinct datagrams the
	// generator sent round and round (for replays: how many were
	// captured).
	Flood         string  `json:"flood,omitempty"`
	FloodPackets  int     `json:"flood_packets,omitempty"`
	FloodSent     uint64  `json:"flood_sent,omitempty"`
	FloodPPS      float64 `json:"flood_pps,omitempty"`
	MatchedGbps   float64 `json:"matched_gbps,omitempty"`
	MatchedSent   uint64  `json:"matched_sent,omitempty"`
	MatchedPPS    float64 `json:"matched_pps,omitempty"`
	UnfloodedGbps float64 `json:"unflooded_gbps,omitempty"`

	// yip-router's FEC over the run (after minus before, warm-up
	// included); nil for wireguard-go.
	FEC *fecStats `json:"fec,omitempty"`
	// FECSteady is the same over the steady window the CPU is sampled in
	// (after the -O warm-up, a margin in from either end): what FEC
	// spends once the flow and the adapter have settled (iperf3 tests
	// only).
	FECSteady *fecStats `json:"fec_steady,omitempty"`
	// PathStates counts the sending side's path states over the same
	// steady window, read every pathEvery (samplePaths); nil for
	// wireguard-go. An unknown state is named by why (unknownPath):
	// "unknown-tx-no-echo" or "unknown-rx-no-echo" when the sender's or
	// the receiver's lane has not heard the other read the delay echo.
	PathStates map[string]int `json:"path_states,omitempty"`
	// QueueDrops is when the bottleneck's queue dropped A→B over the
	// same window, against its delay (queuedrops.go); nil without a
	// bottleneck. queueBins are its bins, for -series.
	QueueDrops *queueDrops `json:"queue_drops,omitempty"`
	queueBins  []queueBin
	// intervals are the sender's iperf3 intervals, for -series.
	intervals []iperfInterval
}

// PathQueuedPct is the share of PathStates that found the path queued,
// just drained, or split (the adapter counts loss then, or the peer's
// share of it in a queue, as congestion), % (NaN without samples).
func (r Record) PathQueuedPct() float64 {
	n, q := 0, 0
	for s, v := range r.PathStates {
		n += v
		if congested(s) {
			q += v
		}
	}
	return 100 * divNaN(float64(q), float64(n))
}

// congested reports whether a path state (fec.PathState's names) says
// the last loss report's loss was, at least in part, a queue's.
func congested(state string) bool {
	return state == "queued" || state == "drained" || state == "split"
}

// queueStat is f of the run's queue_drops, NaN without a bottleneck (no
// bins were taken).
func (r Record) queueStat(f func(q *queueDrops) float64) float64 {
	if r.QueueDrops == nil {
		return math.NaN()
	}
	return f(r.QueueDrops)
}

// QueueDropEpisodes and QueueDropBins are the runs of binEvery bins with
// queue drops, and those bins (NaN without a bottleneck).
func (r Record) QueueDropEpisodes() float64 {
	return r.queueStat(func(q *queueDrops) float64 { return float64(q.Episodes) })
}

func (r Record) QueueDropBins() float64 {
	return r.queueStat(func(q *queueDrops) float64 { return float64(q.DropBins) })
}

// QueueDropsHalfFullPct is the share of the queue's drops that came in a
// bin, or just after one, with the queue at least half full, % (NaN
// without drops).
func (r Record) QueueDropsHalfFullPct() float64 {
	return r.queueStat(func(q *queueDrops) float64 { return 100 * divNaN(float64(q.HalfFull), float64(q.Drops)) })
}

// DropBinQueueMs is the median queue delay of the bins with drops (NaN
// without any).
func (r Record) DropBinQueueMs() float64 {
	return r.queueStat(func(q *queueDrops) float64 {
		if q.DropBins == 0 {
			return math.NaN()
		}
		return q.DropQueueMedMs
	})
}

// QueueDropsPathQueuedPct is the share of the queue's drops whose
// sender's latest path sample was queued, drained or split, % (NaN without
// drops after a sample: wireguard-go).
func (r Record) QueueDropsPathQueuedPct() float64 {
	return r.queueStat(func(q *queueDrops) float64 { return 100 * divNaN(float64(q.PathQueued), float64(q.PathSeen)) })
}

// fecStats are yip-router's FEC counters: the sending side's parity and
// all datagrams out (data, parity, control), the receiving side's data
// symbols recovered and lost for good, and the receiving side's parity
// and datagrams out (a TCP flow's ACK lanes).
type fecStats struct {
	ParityOut   uint64 `json:"parity_out"`
	UDPOut      uint64 `json:"udp_out"`
	Recovered   uint64 `json:"recovered"`
	Unrecovered uint64 `json:"unrecovered"`
	ParityBack  uint64 `json:"parity_back"`
	UDPBack     uint64 `json:"udp_back"`
}

// parityPct is the sender's parity datagrams per other datagram, % (NaN
// without FEC counters).
func (f *fecStats) parityPct() float64 {
	if f == nil {
		return math.NaN()
	}
	return 100 * div(float64(f.ParityOut), float64(f.UDPOut-min(f.ParityOut, f.UDPOut)))
}

// backParityPct is the receiving side's parity datagrams per other
// datagram it sent, % (NaN without FEC counters).
func (f *fecStats) backParityPct() float64 {
	if f == nil {
		return math.NaN()
	}
	return 100 * div(float64(f.ParityBack), float64(f.UDPBack-min(f.ParityBack, f.UDPBack)))
}

// FECBackParityPct is backParityPct over the steady window.
func (r Record) FECBackParityPct() float64 { return r.FECSteady.backParityPct() }

// FECParityPct is parityPct over the run, FECSteadyParityPct over the
// steady window.
func (r Record) FECParityPct() float64       { return r.FEC.parityPct() }
func (r Record) FECSteadyParityPct() float64 { return r.FECSteady.parityPct() }

// FECRecovered and FECUnrecovered are the receiver's data symbols
// recovered by FEC and lost for good (NaN without FEC counters).
func (r Record) FECRecovered() float64 {
	if r.FEC == nil {
		return math.NaN()
	}
	return float64(r.FEC.Recovered)
}

func (r Record) FECUnrecovered() float64 {
	if r.FEC == nil {
		return math.NaN()
	}
	return float64(r.FEC.Unrecovered)
}

// BridgeDropPct is the share of frames the bridge dropped in direction
// dir (all causes), %.
func (r Record) BridgeDropPct(dir int) float64 {
	if dir >= len(r.Bridge) {
		return 0
	}
	b := r.Bridge[dir]
	return 100 * div(float64(b.DropLoss+b.DropBurst+b.DropFull+b.DropQueue+b.DropOther), float64(b.Seen))
}

// ChannelLossPct is the share of frames the emulated channel lost in
// direction dir (random and burst loss), %.
func (r Record) ChannelLossPct(dir int) float64 {
	if dir >= len(r.Bridge) {
		return 0
	}
	b := r.Bridge[dir]
	return 100 * div(float64(b.DropLoss+b.DropBurst), float64(b.Seen))
}

// QueueDropPct is the share of the frames that reached the bottleneck
// (those the channel did not lose first) its queue dropped in direction
// dir, % (NaN without a bottleneck).
func (r Record) QueueDropPct(dir int) float64 {
	if dir >= len(r.Bridge) || r.LinkBps == 0 {
		return math.NaN()
	}
	b := r.Bridge[dir]
	return 100 * div(float64(b.DropQueue), float64(b.Seen-min(b.Seen, b.DropLoss+b.DropBurst)))
}

// WANDelayMs is the mean time frames that passed spent in the bridge in
// direction dir (propagation delay plus the bottleneck's queueing), ms.
func (r Record) WANDelayMs(dir int) float64 {
	if dir >= len(r.Bridge) {
		return math.NaN()
	}
	return r.Bridge[dir].MeanDelayMs
}

// LinkPct is goodput as a share of the WAN bottleneck, % (NaN without
// one).
func (r Record) LinkPct() float64 {
	if r.LinkBps == 0 {
		return math.NaN()
	}
	return 100 * r.RecvGbps * 1e9 / float64(r.LinkBps)
}

// BridgeOverruns is the frames the bridge dropped because its buffers
// were full, both directions: where it, not the emulated WAN, was the
// bottleneck.
func (r Record) BridgeOverruns() float64 {
	var n uint64
	for _, b := range r.Bridge {
		n += b.DropFull
	}
	return float64(n)
}

// flooded reports whether r is a flow under a flood.
func (r Record) flooded() bool { return r.Flood != "" && r.Flood != floodNone }

// FloodVsMatched is the flow's goodput under the flood over its goodput
// under the CPU-matched baseline: what the daemon's own handling of the
// flood cost (NaN for a record that is not a flow under a flood, or
// without a baseline).
func (r Record) FloodVsMatched() float64 {
	if !r.flooded() {
		return math.NaN()
	}
	return divNaN(r.RecvGbps, r.MatchedGbps)
}

// FloodVsUnflooded is the goodput under the flood over the unflooded
// flow's; MatchedVsUnflooded the CPU-matched baseline's over it: the
// share of the loss the generator and the kernel account for (NaN as
// above, or without the unflooded flow).
func (r Record) FloodVsUnflooded() float64 {
	if !r.flooded() {
		return math.NaN()
	}
	return divNaN(r.RecvGbps, r.UnfloodedGbps)
}

func (r Record) MatchedVsUnflooded() float64 {
	if !r.flooded() || r.MatchedGbps == 0 {
		return math.NaN()
	}
	return divNaN(r.MatchedGbps, r.UnfloodedGbps)
}

// RateVsMatched is the attacker's rate under the flood over its rate in
// the CPU-matched baseline: near 1 when the generator ran alike in both
// (NaN as above).
func (r Record) RateVsMatched() float64 {
	if !r.flooded() {
		return math.NaN()
	}
	return divNaN(r.FloodPPS, r.MatchedPPS)
}

// RxCores is the receiving daemon's CPU use in cores (CPU s / wall s).
func (r Record) RxCores() float64 { return div(r.RxCPUSec, r.WindowSec) }

// TxCores is the sending daemon's CPU use in cores.
func (r Record) TxCores() float64 { return div(r.TxCPUSec, r.WindowSec) }

// GbpsPerRxCore is goodput per core the receiving daemon used.
func (r Record) GbpsPerRxCore() float64 { return div(r.RecvGbps, r.RxCores()) }

// RetransPct is retransmitted segments as a share of segments sent.
func (r Record) RetransPct() float64 {
	return 100 * div(float64(r.TCPRetransSeg), float64(r.TCPOutSegs))
}

// divNaN is a/b, NaN when b is 0 (a ratio that does not apply).
func divNaN(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
