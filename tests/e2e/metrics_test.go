package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/dashboard"
	"github.com/yip-router/yip-router/internal/lab"
)

// Router B serves Prometheus metrics on loopback inside its namespace;
// after traffic, a scrape shows the handshake, the packets and the peer.
func TestMetricsScrape(t *testing.T) {
	const addr = "127.0.0.1:9586"
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, Extra: [2]string{"", "MetricsListen = " + addr}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 20, 5*time.Millisecond)
	if err != nil || len(rtts) < 15 {
		t.Fatalf("ping: %d/20 replies, %v", len(rtts), err)
	}
	// Every answered ping crossed B's TUN and sockets at least once (a
	// busy machine may lose a few); counters are published every 50 ms.
	atLeast := float64(len(rtts))
	time.Sleep(200 * time.Millisecond)
	body, err := scrapeB(l, addr)
	if err != nil {
		t.Fatalf("scraping router B's metrics (is MetricsListen wired into `up`?): %v", err)
	}
	m := parseMetrics(body)
	pub := l.PublicKey(lab.A).String()
	sum := func(name string, match func(labels string) bool) float64 {
		s := 0.0
		for k, v := range m {
			n, labels, _ := strings.Cut(k, "{")
			if n == name && (match == nil || match(labels)) {
				s += v
			}
		}
		return s
	}
	has := func(sub string) func(string) bool { return func(l string) bool { return strings.Contains(l, sub) } }
	checks := []struct {
		what string
		v    float64
		ok   func(float64) bool
	}{
		{"handshakes answered", m[`yip_handshakes_total{event="answered"}`], func(v float64) bool { return v >= 1 }},
		{"handshakes refused", m[`yip_handshakes_total{event="refused"}`], func(v float64) bool { return v == 0 }},
		{"datagrams in", sum("yip_shard_udp_datagrams_total", has(`direction="in"`)), func(v float64) bool { return v >= atLeast }},
		{"datagrams out", sum("yip_shard_udp_datagrams_total", has(`direction="out"`)), func(v float64) bool { return v >= atLeast }},
		{"bytes in", sum("yip_shard_udp_bytes_total", has(`direction="in"`)), func(v float64) bool { return v > 0 }},
		{"TUN packets out", sum("yip_shard_tun_packets_total", has(`direction="out"`)), func(v float64) bool { return v >= atLeast }},
		{"bad tag drops", sum("yip_shard_drops_total", has(`reason="bad_tag"`)), func(v float64) bool { return v == 0 }},
		{"shards", m["yip_router_shards"], func(v float64) bool { return v == 2 }},
		{"peer rx bytes", m[`yip_peer_rx_bytes_total{peer="`+pub+`"}`], func(v float64) bool { return v > 0 }},
		{"peer lanes", m[`yip_peer_lanes{peer="`+pub+`"}`], func(v float64) bool { return v == 2 }},
		{"peer last handshake", m[`yip_peer_last_handshake_seconds{peer="`+pub+`"}`], func(v float64) bool {
			return v > float64(time.Now().Add(-time.Minute).Unix()) && v <= float64(time.Now().Unix()+1)
		}},
	}
	for _, c := range checks {
		if !c.ok(c.v) {
			t.Errorf("%s = %v", c.what, c.v)
		}
	}
	// Every metric and label the dashboard and the alert rules name is in
	// the live scrape (label values only as far as this traffic produced
	// them: the router unit test checks those against the collector).
	exp, err := dashboard.FromText(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	dash, vars, err := dashboard.DashboardQueries("../../deploy/grafana/yip-router.json")
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := dashboard.AlertQueries("../../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	problems, _ := dashboard.Check(exp, append(dash, alerts...), vars, false)
	for _, p := range problems {
		t.Errorf("live scrape: %s", p)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

// parseMetrics reads the Prometheus text format's samples into
// "name{labels}" → value (labels as written, in the exposition's order).
func parseMetrics(text string) map[string]float64 {
	m := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			panic(fmt.Sprintf("metrics line %q: %v", line, err))
		}
		m[line[:i]] = v
	}
	return m
}
