package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// iperfJSON is the part of iperf3's --json client report that the
// comparison reads. end.sum_received is what the receiving side (the
// server) counted, for TCP and, since iperf3 3.10, for UDP too. Both sums
// leave out the -O warm-up.
type iperfJSON struct {
	Error string `json:"error"`
	Start struct {
		TestStart struct {
			Protocol string `json:"protocol"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Streams []struct {
			Start       float64 `json:"start"`
			End         float64 `json:"end"`
			Bits        float64 `json:"bits_per_second"`
			Retransmits int64   `json:"retransmits"`
			Cwnd        int64   `json:"snd_cwnd"` // bytes
			RTT         float64 `json:"rtt"`      // µs
			Omitted     bool    `json:"omitted"`
		} `json:"streams"`
	} `json:"intervals"`
	End struct {
		SumSent struct {
			Seconds       float64 `json:"seconds"`
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int64   `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			Seconds       float64 `json:"seconds"`
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			LostPercent   float64 `json:"lost_percent"`
			LostPackets   int64   `json:"lost_packets"`
			Packets       int64   `json:"packets"`
		} `json:"sum_received"`
		SenderCC string `json:"sender_tcp_congestion"`
		Streams  []struct {
			Sender struct {
				MeanRTT float64 `json:"mean_rtt"` // µs, TCP only
			} `json:"sender"`
		} `json:"streams"`
	} `json:"end"`
}

// iperfResult is one iperf3 run as the comparison records it.
type iperfResult struct {
	UDP         bool
	RecvGbps    float64 // receiver goodput (UDP: delivered)
	SentGbps    float64 // what the sender pushed (UDP: offered)
	Retransmits int64   // TCP, sender's count
	LostPct     float64 // UDP: 1 - received/sent bytes, in percent
	IperfLost   float64 // UDP: iperf3's own lost_percent (see parseIperf)
	CC          string  // TCP congestion control the sender used
	// RTTms is the inner TCP flows' round-trip time as the sending
	// kernel smoothed it, iperf3's mean_rtt averaged over streams (ms).
	RTTms float64
	// Intervals are the first stream's reports per iperf3 interval (-i),
	// warm-up included, for -series.
	Intervals []iperfInterval
}

// iperfInterval is one interval of an iperf3 TCP sender: when it began
// (s from the start, warm-up included), goodput, the retransmits in it and
// the kernel's congestion window and smoothed RTT at its end.
type iperfInterval struct {
	Start       float64
	Mbps        float64
	Retransmits int64
	CwndKiB     float64 // snd_cwnd
	RTTms       float64
	Omitted     bool
}

// parseIperf reads an iperf3 --json client report.
func parseIperf(b []byte) (iperfResult, error) {
	var j iperfJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return iperfResult{}, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if j.Error != "" {
		return iperfResult{}, fmt.Errorf("iperf3: %s", j.Error)
	}
	if j.End.SumReceived.Seconds == 0 {
		return iperfResult{}, errors.New("iperf3 JSON: no end.sum_received (iperf3 older than 3.10, or the test did not finish)")
	}
	r := iperfResult{
		UDP:      j.Start.TestStart.Protocol == "UDP",
		RecvGbps: j.End.SumReceived.BitsPerSecond / 1e9,
		SentGbps: j.End.SumSent.BitsPerSecond / 1e9,
		CC:       j.End.SenderCC,
	}
	if r.UDP {
		// iperf3's lost_percent counts sequence-number gaps and goes
		// wrong (past 100%) when -O drops the warm-up; the bytes each
		// side counted after the warm-up do not.
		r.IperfLost = j.End.SumReceived.LostPercent
		if sent := j.End.SumSent.Bytes; sent > 0 {
			r.LostPct = max(0, 100*(1-j.End.SumReceived.Bytes/sent))
		}
	} else {
		r.Retransmits = j.End.SumSent.Retransmits
		var n float64
		for _, st := range j.End.Streams {
			if st.Sender.MeanRTT > 0 {
				r.RTTms += st.Sender.MeanRTT / 1000
				n++
			}
		}
		r.RTTms = div(r.RTTms, n)
		// iperf3 starts its clock anew when the -O warm-up ends: the
		// intervals after it are offset by the warm-up's end.
		warm := 0.0
		for _, iv := range j.Intervals {
			if len(iv.Streams) == 0 {
				continue
			}
			st := iv.Streams[0]
			at := st.Start
			if st.Omitted {
				warm = st.End
			} else if at+1e-6 < warm {
				at += warm
			}
			r.Intervals = append(r.Intervals, iperfInterval{
				Start: at, Mbps: st.Bits / 1e6, Retransmits: st.Retransmits,
				CwndKiB: float64(st.Cwnd) / 1024, RTTms: st.RTT / 1000, Omitted: st.Omitted,
			})
		}
	}
	return r, nil
}
