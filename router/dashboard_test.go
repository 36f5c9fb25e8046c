package router

// The Grafana dashboard (deploy/grafana) and the alert rules
// (deploy/prometheus) name only metrics, labels and label values that the
// collector exports (internal/dashboard does the checking).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/dashboard"
)

const (
	dashboardPath = "../deploy/grafana/yip-router.json"
	alertsPath    = "../deploy/prometheus/alerts.yml"
	promReadme    = "../deploy/prometheus/README.md"
)

// exported gathers what /metrics serves over a Status with every figure
// present.
func exported(t *testing.T) dashboard.Exported {
	t.Helper()
	src := &fakeStatus{Status{
		Interface: "yip0", PublicKey: peerKey, ListenPort: 51820, Uptime: time.Minute,
		Shards:   []ShardStatus{{ID: 0, CPU: 0, Counters: map[string]uint64{}}, {ID: 1, CPU: 1, Counters: map[string]uint64{}}},
		Offloads: map[string]string{"tso": "on", "uso": "on", "gro": "on", "udp-gso": "on", "udp-gro": "off: DisableOffload"},
		Peers:    []PeerStatus{{PublicKey: peerKey, LastHandshake: time.Now()}},
	}}
	mfs, err := newScrapeGatherer(src, false).Gather()
	if err != nil {
		t.Fatal(err)
	}
	return dashboard.FromFamilies(mfs)
}

func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	dash, vars, err := dashboard.DashboardQueries(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) < 10 {
		t.Fatalf("%s: only %d queries found", dashboardPath, len(dash))
	}
	alerts, err := dashboard.AlertQueries(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	problems, used := dashboard.Check(exported(t), append(dash, alerts...), vars, true)
	for _, p := range problems {
		t.Error(p)
	}
	// The dashboard covers what the issue asked of it.
	for _, n := range []string{"yip_shard_udp_datagrams_total", "yip_shard_drops_total", "yip_peer_fec_unrecovered_total",
		"yip_shard_fec_parity_sent_total", "yip_handshakes_total", "yip_offload_enabled", "yip_kernel_drops_total",
		"yip_shard_pool_buffers_high_water", "yip_shard_ring_occupancy_high_water", "yip_peer_lanes"} {
		if !used[n] {
			t.Errorf("neither the dashboard nor the alerts show %s", n)
		}
	}
}

// A check that cannot fail proves nothing: a renamed metric, a missing
// label and an unknown label value are each reported.
func TestDashboardCheckCatchesMismatches(t *testing.T) {
	exp := exported(t)
	for _, tc := range []struct{ expr, want string }{
		{`rate(yip_shard_udp_datagram_total[5m])`, "is not exported"},
		{`sum by (lane) (rate(yip_shard_drops_total[5m]))`, `label "lane"`},
		{`rate(yip_shard_drops_total{reason="gremlins"}[5m])`, `never has the value "gremlins"`},
		{`rate(process_cpu_seconds_total[5m]) > 1`, "no yip_ metric"},
		{`uptime == 0`, "no yip_ metric"},
	} {
		problems, _ := dashboard.Check(exp, []dashboard.Query{{Where: "test", Expr: tc.expr}}, nil, true)
		if len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
			t.Errorf("%s: problems %q, want one containing %q", tc.expr, problems, tc.want)
		}
	}
	// The scrape's own health names no yip_ metric and is no mistake.
	if problems, _ := dashboard.Check(exp, []dashboard.Query{{Where: "test", Expr: `up{job="yip-router"} == 0`, Uses: []string{"instance"}}}, nil, true); len(problems) != 0 {
		t.Errorf("up: problems %q", problems)
	}
}

// YipRouterDown matches the scrape job that the README's scrape config
// names: a router that does not answer has only the scrape's up, which
// carries no label of the router's own.
func TestAlertRouterDownMatchesReadmeJob(t *testing.T) {
	b, err := os.ReadFile(promReadme)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`job_name:\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no job_name in the scrape config", promReadme)
	}
	alerts, err := dashboard.AlertQueries(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range alerts {
		if q.Where == "alert YipRouterDown" {
			if want := `up{job="` + string(m[1]) + `"}`; !strings.Contains(q.Expr, want) {
				t.Errorf("YipRouterDown: %q does not name %s, the README's job", q.Expr, want)
			}
			return
		}
	}
	t.Error("no alert YipRouterDown")
}

// The dashboard's expressions parse as PromQL: promtool checks them as
// recording rules, with the Grafana variables filled in. Skipped without
// promtool (make promtool-check provides one).
func TestDashboardPromQL(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if p, _ := filepath.Abs("../bin/promtool"); fileExists(p) {
			promtool = p
		} else {
			t.Skip("promtool not found (make promtool-check fetches one into bin/)")
		}
	}
	qs, _, err := dashboard.DashboardQueries(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	r := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, q := range qs {
		e, _ := json.Marshal(r.Replace(q.Expr)) // a JSON string is a YAML string
		b.WriteString("      - record: dashboard_query_" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "\n        expr: " + string(e) + "\n")
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, b.String())
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
