package router

// Every alert links its section of docs/RUNBOOK.md, and the runbook's own
// links name headings that exist: a renamed heading fails here, not on an
// operator's click during an outage.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/yip-router/yip-router/internal/dashboard"
)

const (
	runbookPath = "../docs/RUNBOOK.md"
	// runbookURL is the runbook in the module's repository, as the alerts
	// link it (deploy/prometheus/README.md: pointing them at a mirror).
	runbookURL = "https://github.com/yip-router/yip-router/blob/main/docs/RUNBOOK.md#"
)

func TestAlertRunbooks(t *testing.T) {
	alerts, err := dashboard.AlertQueries(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(t, runbookPath)
	for _, q := range alerts {
		anchor, ok := strings.CutPrefix(q.Runbook, runbookURL)
		if !ok {
			t.Errorf("%s: runbook_url %q, want %s<heading>", q.Where, q.Runbook, runbookURL)
			continue
		}
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url names #%s, which is no heading of %s", q.Where, anchor, runbookPath)
		}
	}
}

// The runbook's links to its own sections and to other documents' headings
// lead somewhere.
func TestRunbookLinks(t *testing.T) {
	b, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#\s]*)#([^)\s]+)\)`).FindAllStringSubmatch(string(b), -1)
	if len(links) < 10 {
		t.Fatalf("%s: only %d links with an anchor found", runbookPath, len(links))
	}
	for _, l := range links {
		file := runbookPath
		if l[1] != "" {
			file = filepath.Join(filepath.Dir(runbookPath), l[1])
		}
		if !strings.HasSuffix(file, ".md") {
			continue
		}
		if !headingAnchors(t, file)[l[2]] {
			t.Errorf("%s: link %s#%s: no such heading", runbookPath, l[1], l[2])
		}
	}
}

func TestGithubAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"YipPeerDown", "yippeerdown"},
		{"8. Troubleshooting", "8-troubleshooting"},
		{"Traffic flows but `show` counts drops", "traffic-flows-but-show-counts-drops"},
		{"The metrics scrape with 10,000 peers (2026-12-01)", "the-metrics-scrape-with-10000-peers-2026-12-01"},
		{"Lanes and steering (as built)", "lanes-and-steering-as-built"},
		{"`yip-router show` for scripts", "yip-router-show-for-scripts"},
	} {
		if got := githubAnchor(tc.heading); got != tc.want {
			t.Errorf("githubAnchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// headingAnchors are the anchors GitHub gives the headings of the Markdown
// file at path (headings inside code fences are none; a repeated anchor
// gets -1, -2, …).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors, seen := map[string]bool{}, map[string]int{}
	fenced := false
	for l := range strings.Lines(string(b)) {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		text, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(l, "#") {
			continue
		}
		a := githubAnchor(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// githubAnchor is GitHub's anchor for a heading: lower case, spaces to
// hyphens, every other character but letters, digits, '-' and '_'
// dropped (the backticks of inline code included).
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
