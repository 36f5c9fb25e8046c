package router

// The Grafana dashboard (deploy/grafana) and the alert rules
// (deploy/prometheus) name only metrics, labels and label values that the
// collector exports: a renamed metric or label fails here, not silently
// on an operator's screen.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	dashboardPath = "../deploy/grafana/yip-router.json"
	alertsPath    = "../deploy/prometheus/alerts.yml"
)

// scrapeLabels are added by Prometheus at scrape time.
var scrapeLabels = []string{"job", "instance"}

// exported collects the collector over a Status with every figure present:
// metric name -> label name -> values seen.
func exported(t *testing.T) map[string]map[string]map[string]bool {
	t.Helper()
	src := &fakeStatus{Status{
		Interface: "yip0", PublicKey: peerKey, ListenPort: 51820, Uptime: time.Minute,
		Shards:   []ShardStatus{{ID: 0, CPU: 0, Counters: map[string]uint64{}}, {ID: 1, CPU: 1, Counters: map[string]uint64{}}},
		Offloads: map[string]string{"tso": "on", "uso": "on", "gro": "on", "udp-gso": "on", "udp-gro": "off: DisableOffload"},
		Peers:    []PeerStatus{{PublicKey: peerKey, LastHandshake: time.Now()}},
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]map[string]bool{}
	for _, mf := range mfs {
		labels := map[string]map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] == nil {
					labels[lp.GetName()] = map[string]bool{}
				}
				labels[lp.GetName()][lp.GetValue()] = true
			}
		}
		out[mf.GetName()] = labels
	}
	return out
}

// query is one PromQL expression and the labels its output is read by
// (legend, annotations).
type query struct {
	where, expr string
	uses        []string
}

var (
	metricRE   = regexp.MustCompile(`\byip_[a-z0-9_]+`)
	selectorRE = regexp.MustCompile(`(yip_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRE = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	legendRE   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	annotRE    = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	labelValRE = regexp.MustCompile(`label_values\(\s*(yip_[a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// dashboardQueries walks the dashboard JSON for every target's expr and
// legendFormat, and the template variables' queries.
func dashboardQueries(t *testing.T) (qs []query, varQueries []string) {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if v, _ := d["schemaVersion"].(float64); v != 39 {
		t.Errorf("%s: schemaVersion %v, docs say 39", dashboardPath, d["schemaVersion"])
	}
	var walk func(v any, title string)
	walk = func(v any, title string) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok {
				q := query{where: "dashboard panel " + title, expr: e}
				if l, ok := v["legendFormat"].(string); ok {
					for _, m := range legendRE.FindAllStringSubmatch(l, -1) {
						q.uses = append(q.uses, m[1])
					}
				}
				qs = append(qs, q)
			}
			if s, ok := v["definition"].(string); ok {
				varQueries = append(varQueries, s)
			}
			for _, c := range v {
				walk(c, title)
			}
		case []any:
			for _, c := range v {
				walk(c, title)
			}
		}
	}
	walk(d, "")
	return qs, varQueries
}

// alertQueries splits alerts.yml at each "- alert:" and takes the rule's
// expr (one line or a "|" block) and the labels its annotations use.
func alertQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var qs []query
	chunks := strings.Split(string(b), "- alert:")
	for _, c := range chunks[1:] {
		lines := strings.Split(c, "\n")
		q := query{where: "alert " + strings.TrimSpace(lines[0])}
		for i, l := range lines {
			s := strings.TrimSpace(l)
			e, ok := strings.CutPrefix(s, "expr:")
			if !ok {
				continue
			}
			e = strings.TrimSpace(e)
			if e == "|" {
				indent := len(l) - len(strings.TrimLeft(l, " "))
				var block []string
				for _, n := range lines[i+1:] {
					if strings.TrimSpace(n) != "" && len(n)-len(strings.TrimLeft(n, " ")) <= indent {
						break
					}
					block = append(block, strings.TrimSpace(n))
				}
				e = strings.Join(block, " ")
			}
			q.expr = e
		}
		if q.expr == "" {
			t.Errorf("%s: no expr found", q.where)
		}
		for _, m := range annotRE.FindAllStringSubmatch(c, -1) {
			q.uses = append(q.uses, m[1])
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		t.Fatalf("%s: no alerts found", alertsPath)
	}
	return qs
}

func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	exp := exported(t)
	dash, vars := dashboardQueries(t)
	if len(dash) < 10 {
		t.Fatalf("%s: only %d queries found", dashboardPath, len(dash))
	}
	used := map[string]bool{}
	for _, q := range append(dash, alertQueries(t)...) {
		// Labels the expression's series can carry.
		avail := slices.Clone(scrapeLabels)
		names := metricRE.FindAllString(q.expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: no yip_ metric in %q", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = true
			labels, ok := exp[n]
			if !ok {
				t.Errorf("%s: metric %s is not exported (%q)", q.where, n, q.expr)
				continue
			}
			for l := range labels {
				avail = append(avail, l)
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(q.expr, -1) {
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := m[1], m[2], m[3]
				if slices.Contains(scrapeLabels, label) {
					continue
				}
				values, ok := exp[sel[1]][label]
				if !ok {
					t.Errorf("%s: %s has no label %q", q.where, sel[1], label)
					continue
				}
				if (op == "=" || op == "!=") && !values[value] {
					t.Errorf("%s: %s{%s} never has the value %q", q.where, sel[1], label, value)
				}
			}
		}
		var want []string
		for _, g := range groupingRE.FindAllStringSubmatch(q.expr, -1) {
			for l := range strings.SplitSeq(g[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					want = append(want, l)
				}
			}
		}
		for _, l := range append(want, q.uses...) {
			if !slices.Contains(avail, l) {
				t.Errorf("%s: label %q is on none of the series of %q", q.where, l, q.expr)
			}
		}
	}
	for _, v := range vars {
		for _, m := range labelValRE.FindAllStringSubmatch(v, -1) {
			if _, ok := exp[m[1]]; !ok {
				t.Errorf("dashboard variable %q: metric %s is not exported", v, m[1])
			}
		}
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
	qs, _ := dashboardQueries(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	r := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, q := range qs {
		e, _ := json.Marshal(r.Replace(q.expr)) // a JSON string is a YAML string
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
