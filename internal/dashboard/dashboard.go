// Package dashboard reads the Grafana dashboard (deploy/grafana) and the
// Prometheus alert rules (deploy/prometheus) and checks every metric,
// label and label value they name against what a router exports: a renamed
// metric or label then fails a test instead of going blank on an
// operator's screen. The router's unit test checks the collector; an
// end-to-end test checks a live router's scrape.
package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// SchemaVersion is the Grafana JSON model version the dashboard is written
// for (docs/USER_GUIDE.md says so too).
const SchemaVersion = 39

// Exported is what a router exports: metric name → label name → values.
type Exported map[string]map[string]map[string]bool

// FromFamilies collects metric families (a registry's Gather).
func FromFamilies(mfs []*dto.MetricFamily) Exported {
	out := Exported{}
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

// FromText parses a scrape in the Prometheus text format.
func FromText(r io.Reader) (Exported, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	var list []*dto.MetricFamily
	for _, mf := range mfs {
		list = append(list, mf)
	}
	return FromFamilies(list), nil
}

// Query is one PromQL expression and the labels its output is read by
// (legend, annotations); for an alert, also its runbook_url annotation.
type Query struct {
	Where, Expr string
	Uses        []string
	Runbook     string
}

var (
	metricRE   = regexp.MustCompile(`\byip_[a-z0-9_]+`)
	selectorRE = regexp.MustCompile(`(yip_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRE = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	legendRE   = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	annotRE    = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	labelValRE = regexp.MustCompile(`label_values\(\s*(yip_[a-z0-9_]+)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
	upRE       = regexp.MustCompile(`(^|[^a-zA-Z0-9_:])` + ScrapeMetric + `\b`)
	runbookRE  = regexp.MustCompile(`^runbook_url:\s*["']?([^"'\s]+)["']?$`)
)

// DashboardQueries walks the dashboard JSON at path for every target's expr
// and legendFormat, and the template variables' queries. It fails on a
// schemaVersion other than SchemaVersion.
func DashboardQueries(path string) (qs []Query, varQueries []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	if v, _ := d["schemaVersion"].(float64); v != SchemaVersion {
		return nil, nil, fmt.Errorf("%s: schemaVersion %v, want %d", path, d["schemaVersion"], SchemaVersion)
	}
	var walk func(v any, title string)
	walk = func(v any, title string) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if e, ok := v["expr"].(string); ok {
				q := Query{Where: "dashboard panel " + title, Expr: e}
				if l, ok := v["legendFormat"].(string); ok {
					for _, m := range legendRE.FindAllStringSubmatch(l, -1) {
						q.Uses = append(q.Uses, m[1])
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
	return qs, varQueries, nil
}

// AlertQueries splits the rules file at path at each "- alert:" and takes
// the rule's expr (one line or a "|" block), the labels its annotations
// use and its runbook_url.
func AlertQueries(path string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var qs []Query
	chunks := strings.Split(string(b), "- alert:")
	for _, c := range chunks[1:] {
		lines := strings.Split(c, "\n")
		q := Query{Where: "alert " + strings.TrimSpace(lines[0])}
		for i, l := range lines {
			s := strings.TrimSpace(l)
			if m := runbookRE.FindStringSubmatch(s); m != nil {
				q.Runbook = m[1]
			}
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
			q.Expr = e
		}
		if q.Expr == "" {
			return nil, fmt.Errorf("%s: %s: no expr found", path, q.Where)
		}
		for _, m := range annotRE.FindAllStringSubmatch(c, -1) {
			q.Uses = append(q.Uses, m[1])
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%s: no alerts found", path)
	}
	return qs, nil
}

// ScrapeLabels are added by Prometheus at scrape time.
var ScrapeLabels = []string{"job", "instance"}

// ScrapeMetric is the series Prometheus itself writes for every scrape
// (1: the scrape worked, 0: it failed). A query may name it instead of a
// yip_ metric: whether the router answers at all is no metric of its own.
const ScrapeMetric = "up"

// Check returns one problem per metric, label or label value that a query
// or variable names and exp lacks, and the metrics the queries use.
// checkValues also checks equality matchers' values (a live router exports
// only the label values it has seen so far, so a scrape may leave them
// out).
func Check(exp Exported, qs []Query, varQueries []string, checkValues bool) (problems []string, used map[string]bool) {
	used = map[string]bool{}
	for _, q := range qs {
		avail := slices.Clone(ScrapeLabels)
		names := metricRE.FindAllString(q.Expr, -1)
		if len(names) == 0 && !upRE.MatchString(q.Expr) {
			problems = append(problems, fmt.Sprintf("%s: no yip_ metric (nor %s) in %q", q.Where, ScrapeMetric, q.Expr))
		}
		for _, n := range names {
			used[n] = true
			labels, ok := exp[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not exported (%q)", q.Where, n, q.Expr))
				continue
			}
			for l := range labels {
				avail = append(avail, l)
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(q.Expr, -1) {
			for _, m := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := m[1], m[2], m[3]
				if slices.Contains(ScrapeLabels, label) {
					continue
				}
				values, ok := exp[sel[1]][label]
				if !ok {
					if _, known := exp[sel[1]]; known {
						problems = append(problems, fmt.Sprintf("%s: %s has no label %q", q.Where, sel[1], label))
					}
					continue
				}
				if checkValues && (op == "=" || op == "!=") && !values[value] {
					problems = append(problems, fmt.Sprintf("%s: %s{%s} never has the value %q", q.Where, sel[1], label, value))
				}
			}
		}
		var want []string
		for _, g := range groupingRE.FindAllStringSubmatch(q.Expr, -1) {
			for l := range strings.SplitSeq(g[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					want = append(want, l)
				}
			}
		}
		for _, l := range append(want, q.Uses...) {
			if !slices.Contains(avail, l) {
				problems = append(problems, fmt.Sprintf("%s: label %q is on none of the series of %q", q.Where, l, q.Expr))
			}
		}
	}
	for _, v := range varQueries {
		for _, m := range labelValRE.FindAllStringSubmatch(v, -1) {
			if _, ok := exp[m[1]]; !ok {
				problems = append(problems, fmt.Sprintf("dashboard variable %q: metric %s is not exported", v, m[1]))
			}
		}
	}
	return problems, used
}
