package router

// Prometheus metrics (Config.Interface.MetricsListen). Nothing here touches
// the data path: a scrape calls Status, which reads each shard's published
// atomic counters and asks each shard for its lanes on the shard's own
// goroutine. The shards take no lock and do no extra work per packet.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/buildinfo"
	"github.com/yip-router/yip-router/shard"
)

// statusSource is what the collector reads on each scrape (*Router; a fake
// in tests).
type statusSource interface{ Status() Status }

// shardMetric says which metric family and extra label a shard counter
// feeds.
type shardMetric struct {
	desc  *prometheus.Desc
	label string // value of the extra label ("" = none)
}

// collector turns one Status per scrape into metrics.
type collector struct {
	src   statusSource
	shard map[string]shardMetric // by shard counter name ("udp_in")
	descs []*prometheus.Desc

	// st is the scrape's Status (scrapeGatherer sets it around Gather).
	st *Status

	info, build, uptime, shards, handshakes      *prometheus.Desc
	offload, kernelDrops, lookups, eventsDropped *prometheus.Desc
	logSampled                                   *prometheus.Desc
}

// shardFamily maps a shard counter to a metric family: counters that are
// one direction of a pair share a family with a direction label, drops share
// yip_shard_drops_total with a reason label, and any other counter is
// yip_shard_<name>_total.
func shardFamily(name string) (family, label, value, help string) {
	switch name {
	case "tun_in", "tun_out":
		return "yip_shard_tun_packets_total", "direction", strings.TrimPrefix(name, "tun_"),
			"Inner packets read from (in) and written to (out) the shard's TUN queue."
	case "udp_in", "udp_out":
		return "yip_shard_udp_datagrams_total", "direction", strings.TrimPrefix(name, "udp_"),
			"Underlay UDP datagrams received (in) and sent (out) by the shard, parity and control included."
	case "bytes_in", "bytes_out":
		return "yip_shard_udp_bytes_total", "direction", strings.TrimPrefix(name, "bytes_"),
			"Underlay UDP payload bytes received (in) and sent (out) by the shard."
	case "control_in", "control_out":
		return "yip_shard_control_frames_total", "direction", strings.TrimPrefix(name, "control_"),
			"Control frames (keepalives, loss reports) received (in) and sent (out)."
	case "tun_super_in", "tun_super_out":
		return "yip_shard_tun_superpackets_total", "direction", strings.TrimPrefix(name, "tun_super_"),
			"TUN superpackets read and split (in, TSO/USO) and coalesced and written (out, GRO); their packets are in yip_shard_tun_packets_total."
	case "udp_super_in":
		return "yip_shard_udp_gro_messages_total", "", "", "Underlay UDP GRO messages received, each several datagrams (counted in yip_shard_udp_datagrams_total)."
	case "parity_out":
		return "yip_shard_fec_parity_sent_total", "", "", "FEC parity symbols sent."
	case "fec_recovered":
		return "yip_shard_fec_recovered_total", "", "", "Data symbols recovered from FEC parity."
	case "fec_tcp_ts_raised":
		return "yip_shard_fec_tcp_timestamps_raised_total", "", "", "FEC-recovered TCP segments whose timestamp value was raised to that of the latest retransmission the router delivered for their flow, so the receiving host's PAWS check (RFC 7323) does not drop them as older than a retransmission it already took."
	case "handed_off":
		return "yip_shard_handed_off_total", "", "", "Inner packets passed to the shard owning the lane."
	case "taken_over":
		return "yip_shard_taken_over_total", "", "", "Packets received from other shards over the mesh."
	case "roam_trials":
		return "yip_shard_roam_trials_total", "", "", "Tag checks of datagrams that matched no lane at their source address against the shard's lanes (looking for a peer that moved); bounded by a rate limit."
	case "lane_moved":
		return "yip_shard_lane_moves_total", "", "", "Lanes whose remote address moved on an authenticated, non-replayed datagram from a new address (peer roamed)."
	case "lane_move_refused":
		return "yip_shard_lane_move_refusals_total", "", "", "Authenticated datagrams from an address another peer's lane holds (heard there within 15 s, or owned by another shard): delivered, but their lane did not take the address. A peer's keys do not prove its source address; a completed handshake from the address wins it."
	case "lane_adopted":
		return "yip_shard_lane_adoptions_total", "", "", "Lanes moved to this shard because their datagrams arrive here and the listen group cannot steer them (steering by source port, or the eBPF map full), so they stop taking a ring hop."
	case "foreign_lane":
		return "yip_shard_foreign_lane_total", "", "", "Datagrams that arrived on this shard for a lane another shard owns (a source port a NAT rewrote, before the lane's remote is steered); handed to the owner."
	case "fec_evicted":
		return "yip_shard_fec_evicted_groups_total", "", "", "FEC groups given up before they closed to keep a lane's decoder under its byte cap (their missing data is not recovered)."
	case "fec_not_stored":
		return "yip_shard_fec_not_stored_total", "", "", "Symbols delivered but not kept for recovery because the lane's decoder was at its byte cap."
	case "strangers_in", "known_in":
		return "yip_shard_unsteered_datagrams_total", "socket", strings.TrimSuffix(name, "_in"),
			fmt.Sprintf("Datagrams read from the shard's sockets for sources no lane is steered for: strangers (handshakes, roaming peers' first datagrams, junk; at most %d a second not counting a lane's, fewer when junk and unanswered handshakes are long or checked under several keys, the rest waits and overflows) and known (the same from addresses peers are known at, in a queue and at a rate of their own).", shard.StrangerRate)
	case "steer_refused":
		return "yip_shard_steer_refused_total", "", "", "Lanes the listen group's eBPF steering map had no room for: their datagrams reach a shard by the kernel's hash and the lane is moved there."
	}
	switch name {
	case "pool_high_water":
		return "yip_shard_pool_buffers_high_water", "", "", "Most packet buffers of the shard's pool ever in use at once (the pool is fixed; near its size means drops)."
	case "ring_high_water":
		return "yip_shard_ring_occupancy_high_water", "", "", "Most packets ever seen waiting in one of the shard's incoming mesh rings (capacity 1024)."
	}
	if r, ok := strings.CutPrefix(name, "drop_"); ok {
		return "yip_shard_drops_total", "reason", r, "Packets and datagrams dropped, by reason."
	}
	return "yip_shard_" + name + "_total", "", "", "Shard counter " + name + "."
}

func newCollector(src statusSource) *collector {
	c := &collector{src: src, shard: map[string]shardMetric{}}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc(name, help, labels, nil)
		c.descs = append(c.descs, desc)
		return desc
	}
	families := map[string]*prometheus.Desc{}
	for _, k := range shard.Counters() {
		fam, label, value, help := shardFamily(k.String())
		desc := families[fam]
		if desc == nil {
			labels := []string{"shard", "cpu"}
			if label != "" {
				labels = append(labels, label)
			}
			desc = d(fam, help, labels...)
			families[fam] = desc
		}
		c.shard[k.String()] = shardMetric{desc: desc, label: value}
	}
	c.info = d("yip_router_info", "Always 1; the labels name the router.", "interface", "public_key", "listen_port")
	c.build = d("yip_build_info", "Always 1; the labels name the build: its version, the Go release, and the wire version (the framing both ends of a tunnel must share).", "version", "go", "wire")
	c.uptime = d("yip_router_uptime_seconds", "Seconds since the router started.")
	c.shards = d("yip_router_shards", "Number of data-plane shards.")
	c.handshakes = d("yip_handshakes_total", "Handshake events: initiated (initiations sent), completed (responses accepted), answered (initiations answered), cookie_demanded (cookie replies sent: under load, or the source prefix is over its limit for initiations without a cookie), refused (initiations rejected: unknown key, bad MAC, replayed timestamp; and responses that do not authenticate), rate_limited (initiations with a valid cookie over the per-source limit, or responses over the per-initiation limit, dropped before any DH). cookie_capped (initiations from no peer's known address left unanswered over the cap of cookie replies per second).", "event")
	c.offload = d("yip_offload_enabled", "1 if the offload is on: tso, uso (TUN superpackets read), gro (superpackets written to the TUN), udp-gso, udp-gro (underlay batching).", "offload")
	c.lookups = d("yip_endpoint_lookups_total", "Lookups of peers' Endpoint host names while the router runs, by result: ok, failed (the peer keeps its last address; a name without one is retried).", "result")
	c.eventsDropped = d("yip_control_events_dropped_total", "Lane events from the shards (traffic waiting for a handshake, a silent lane, a misplaced lane) dropped because the control core's queue was full; the shards repeat them while their cause lasts. Moves and key confirmations are never dropped.")
	c.logSampled = d("yip_log_lines_sampled_total", "Debug and info log lines left out by the log's sampling: of the lines with one level and message in a second, the first 100 are written, then every 100th. Warnings and errors are never left out.")
	c.kernelDrops = d("yip_kernel_drops_total", "Drops the kernel counts outside the shards: tun_tx (the TUN queue overflowed before a shard read it), tun_rx (the TUN device refused a write), socket (a shard's lane or listen socket's receive buffer was full), strangers (a strangers' socket's small buffer was full: datagrams from sources no lane has, such as a flood), known (a known socket's: the same from an address a peer is known at).", "where")
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the scrape's Status (per-peer
// families are scrapeGatherer's).
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.st
	if st == nil {
		s := c.src.Status()
		st = &s
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(c.info, 1, st.Interface, st.PublicKey, strconv.Itoa(int(st.ListenPort)))
	gauge(c.build, 1, buildinfo.Version(), buildinfo.Go(), strconv.Itoa(crypto.WireVersion))
	gauge(c.uptime, st.Uptime.Seconds())
	gauge(c.shards, float64(len(st.Shards)))
	h := st.Handshakes
	for _, e := range []struct {
		name string
		v    uint64
	}{{"initiated", h.Initiated}, {"completed", h.Completed}, {"answered", h.Answered}, {"cookie_demanded", h.CookieDemanded}, {"refused", h.Refused}, {"rate_limited", h.RateLimited}, {"cookie_capped", h.CookieCapped}} {
		counter(c.handshakes, e.v, e.name)
	}
	for name, v := range st.Offloads {
		on := 0.0
		if v == "on" {
			on = 1
		}
		gauge(c.offload, on, name)
	}
	counter(c.lookups, st.EndpointLookups.OK, "ok")
	counter(c.lookups, st.EndpointLookups.Failed, "failed")
	counter(c.eventsDropped, st.ControlEventsDropped)
	counter(c.logSampled, st.LogLinesSampled)
	counter(c.kernelDrops, st.Kernel.TUNTxDropped, "tun_tx")
	counter(c.kernelDrops, st.Kernel.TUNRxDropped, "tun_rx")
	counter(c.kernelDrops, st.Kernel.SocketDrops, "socket")
	counter(c.kernelDrops, st.Kernel.StrangerDrops, "strangers")
	counter(c.kernelDrops, st.Kernel.KnownDrops, "known")
	for _, s := range st.Shards {
		id, cpu := strconv.Itoa(s.ID), strconv.Itoa(s.CPU)
		// Every known counter, zeros included (Status leaves zeros out):
		// series should not appear out of nowhere on the first drop.
		for _, k := range shard.Counters() {
			m := c.shard[k.String()]
			if k.IsGauge() {
				gauge(m.desc, float64(s.Counters[k.String()]), id, cpu)
				continue
			}
			if m.label != "" {
				counter(m.desc, s.Counters[k.String()], id, cpu, m.label)
			} else {
				counter(m.desc, s.Counters[k.String()], id, cpu)
			}
		}
	}
}

// metricsHandler serves src's metrics, plus the Go runtime's and the
// process's when runtime is set.
func metricsHandler(src statusSource, runtime bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(newScrapeGatherer(src, runtime), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/" {
			http.NotFound(w, req)
			return
		}
		fmt.Fprintln(w, "yip-router: metrics are at /metrics")
	})
	return mux
}

// ServeMetrics serves Prometheus metrics at http://addr/metrics until stop
// is called or the router is closed. Each scrape reads Status once.
func (r *Router) ServeMetrics(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	srv := &http.Server{
		Handler:           metricsHandler(r, true),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      10 * time.Second,
	}
	done, finished := make(chan struct{}), make(chan struct{})
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("metrics server failed", zap.Error(err))
		}
	}()
	go func() {
		defer r.wg.Done()
		defer close(finished)
		select {
		case <-r.stop:
		case <-done:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}, nil
}

// StartMetrics starts the metrics server when cfg sets MetricsListen (a
// no-op otherwise). The server stops with the router (Close) or with stop.
func StartMetrics(r *Router, cfg *config.Config, log *zap.Logger) (stop func(), err error) {
	addr := cfg.Interface.MetricsListen
	if addr == "" {
		return func() {}, nil
	}
	stop, err = r.ServeMetrics(addr)
	if err != nil {
		return nil, fmt.Errorf("MetricsListen = %s: %w", addr, err)
	}
	if log != nil {
		log.Info("metrics", zap.String("url", "http://"+addr+"/metrics"))
	}
	return stop, nil
}
