package router

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
)

// scrapeGatherer is what /metrics serves: the registry's families (router,
// shards, handshakes, offloads, runtime) and the per-peer families, all
// from one Status per scrape. The per-peer families are built here as
// protobuf families in one piece instead of through the registry's
// collector: with 10,000 peers that is 90,000 series, and one const metric
// each, checked and hashed by the registry, made a scrape cost 0.6 s of
// CPU and 77 MB of garbage (BenchmarkScrape10k); Status already sorts the
// peers by key, the order the exposition wants.
type scrapeGatherer struct {
	mu  sync.Mutex // one scrape at a time: c.st is per scrape
	reg *prometheus.Registry
	c   *collector
}

// newScrapeGatherer is src's metrics, plus the Go runtime's and the
// process's when runtime is set.
func newScrapeGatherer(src statusSource, runtime bool) *scrapeGatherer {
	reg := prometheus.NewRegistry()
	c := newCollector(src)
	reg.MustRegister(c)
	if runtime {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return &scrapeGatherer{reg: reg, c: c}
}

// Gather implements prometheus.Gatherer.
func (g *scrapeGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.c.src.Status()
	g.c.st = &st
	defer func() { g.c.st = nil }()
	mfs, err := g.reg.Gather()
	return append(mfs, peerFamilies(st.Peers)...), err
}

// peerFamily is one per-peer family: name, help, type and the value of a
// peer.
type peerFamily struct {
	name, help string
	gauge      bool
	value      func(p *PeerStatus) float64
}

// peerCounterSpan is how long the per-peer counters run: each is the sum of
// the peer's lanes, and a lane's counters move to its new keys at a rekey
// (shard.InstallLane) unless the rekey installs it on another shard, which
// control.Core.install does only where the listen group cannot steer the
// lane (shard/place.go).
const peerCounterSpan = " since its lanes were set up, carried across rekeys. A lane that a rekey installs on another shard than the one holding it (only where the listen group cannot steer it: steering by source port, or the steering map full) starts again from 0, and every lane does when the session expires or the peer returns with another lane count."

var peerFamilyDefs = []peerFamily{
	{"yip_peer_rx_bytes_total", "Inner packet bytes received from the peer" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.RxBytes) }},
	{"yip_peer_tx_bytes_total", "Inner packet bytes sent to the peer" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.TxBytes) }},
	{"yip_peer_rx_packets_total", "Inner packets received from the peer" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.RxPackets) }},
	{"yip_peer_tx_packets_total", "Inner packets sent to the peer" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.TxPackets) }},
	{"yip_peer_fec_recovered_total", "Packets from the peer recovered by FEC" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.FECRecovered) }},
	{"yip_peer_fec_unrecovered_total", "Packets from the peer that FEC could not recover" + peerCounterSpan, false, func(p *PeerStatus) float64 { return float64(p.FECLost) }},
	{"yip_peer_handshakes_total", "Handshakes completed with the peer.", false, func(p *PeerStatus) float64 { return float64(p.Handshakes) }},
	{"yip_peer_last_handshake_seconds", "Unix time of the peer's latest completed handshake; 0 = never.", true, func(p *PeerStatus) float64 {
		if p.LastHandshake.IsZero() {
			return 0
		}
		return float64(p.LastHandshake.UnixNano()) / 1e9
	}},
	{"yip_peer_lanes", "Lanes of the peer's current session (0 = no session).", true, func(p *PeerStatus) float64 { return float64(len(p.Lanes)) }},
}

// peerFamilies builds the per-peer families of peers (sorted by key), each
// series labelled peer=<public key>. A few allocations per family, one per
// peer for its label, none per series.
func peerFamilies(peers []PeerStatus) []*dto.MetricFamily {
	if len(peers) == 0 {
		return nil
	}
	labelName := "peer"
	labels := make([]dto.LabelPair, len(peers))
	labelSets := make([][]*dto.LabelPair, len(peers))
	for i := range peers {
		labels[i] = dto.LabelPair{Name: &labelName, Value: &peers[i].PublicKey}
		labelSets[i] = []*dto.LabelPair{&labels[i]}
	}
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	out := make([]*dto.MetricFamily, 0, len(peerFamilyDefs))
	for fi := range peerFamilyDefs {
		f := &peerFamilyDefs[fi]
		mf := &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: &counter}
		if f.gauge {
			mf.Type = &gauge
		}
		ms := make([]dto.Metric, len(peers))
		ptrs := make([]*dto.Metric, len(peers))
		vals := make([]float64, len(peers))
		var cs []dto.Counter
		var gs []dto.Gauge
		if f.gauge {
			gs = make([]dto.Gauge, len(peers))
		} else {
			cs = make([]dto.Counter, len(peers))
		}
		for i := range peers {
			vals[i] = f.value(&peers[i])
			ms[i].Label = labelSets[i]
			if f.gauge {
				gs[i].Value = &vals[i]
				ms[i].Gauge = &gs[i]
			} else {
				cs[i].Value = &vals[i]
				ms[i].Counter = &cs[i]
			}
			ptrs[i] = &ms[i]
		}
		mf.Metric = ptrs
		out = append(out, mf)
	}
	return out
}
