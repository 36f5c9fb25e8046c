package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/yip-router/yip-router/internal/benchenv"
)

// meta describes the run in the results file.
type meta struct {
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	Interrupted bool      `json:"interrupted,omitempty"`
	benchenv.Host
	WGVersion string  `json:"wireguard_go_version"`
	Iperf3    string  `json:"iperf3_version"`
	Config    *config `json:"config"`
}

func newMeta(c *config) *meta {
	m := &meta{Started: time.Now(), Config: c, Host: benchenv.Describe(c.commit)}
	m.WGVersion = benchenv.FirstLine(exec.Command(c.wgBin, "--version").Output())
	m.Iperf3 = benchenv.FirstLine(exec.Command("iperf3", "--version").Output())
	return m
}

// report prints the table and writes compare-STAMP.json (meta and every
// record) and compare-STAMP.md (header and table) under c.out; STAMP is
// the start time, then -wan for a run through the impairment bridge and
// -quick for a smoke test.
func report(c *config, m *meta, recs []Record, interrupted bool) error {
	m.Finished, m.Interrupted = time.Now(), interrupted
	var tests []string
	for _, s := range testSpecs(c) {
		tests = append(tests, s.name)
	}
	var places []string
	for _, p := range placements(runtime.NumCPU(), c.Placement) {
		places = append(places, p.name)
	}
	var md bytes.Buffer
	md.WriteString(header(c, m))
	md.WriteString(Table(recs, tests, places))
	fmt.Print("\n" + md.String())

	stamp := m.Started.Format("20060102-1504")
	if c.WAN != nil {
		stamp += "-wan"
	}
	if c.Quick {
		stamp += "-quick"
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(struct {
		Meta    *meta    `json:"meta"`
		Records []Record `json:"records"`
	}{m, recs}, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(c.out, "compare-"+stamp)
	if err := os.WriteFile(base+".json", append(raw, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", md.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nraw results: %s.json, table: %s.md\n", base, base)
	return nil
}

// header is the Markdown above the table: what ran, how, and the link
// between the gateways.
func header(c *config, m *meta) string {
	var md bytes.Buffer
	fmt.Fprintf(&md, "# bench-compare %s\n\n", m.Started.Format("2006-01-02 15:04"))
	extra := ""
	if c.YipExtra != "" {
		extra = "; " + c.YipExtra
	}
	fmt.Fprintf(&md, "yip-router %s (FEC %s%s) vs %s; %s; kernel %s; %d CPUs (%s).\n",
		m.Commit, c.YipFEC, extra, m.WGVersion, m.Iperf3, m.Kernel, m.CPUs, m.CPUModel)
	fmt.Fprintf(&md, "Medians of %d interleaved round(s); %s measured per iperf3 run after %s warm-up; inner MTU %d (yip-router), %d (wireguard-go); UDP datagrams %d B; %d pings at 10 ms.",
		c.Rounds, c.Duration, c.Omit, c.MTU, c.WGMTU, c.UDPLen, c.Pings)
	if c.Quick {
		md.WriteString(" QUICK (smoke test: not a measurement).")
	}
	if m.Interrupted {
		md.WriteString(" INTERRUPTED: partial results.")
	}
	md.WriteString("\n")
	if c.WAN != nil {
		fmt.Fprintf(&md, "WAN: %s; both implementations' gateways on one segment through internal/impair's bridge in a middle namespace (offloads off on the bridged links; round n seeded %d+n−1).\n",
			c.WAN, c.WAN.Seed)
	}
	if c.TCPBuf > 0 {
		fmt.Fprintf(&md, "TCP buffers: autotuning up to %s in both gateway namespaces (net.ipv4.tcp_rmem and tcp_wmem max).\n", sizeString(c.TCPBuf))
	} else if c.WAN != nil {
		md.WriteString("TCP buffers: the host's ceilings (-tcp-buf 0), which may limit one flow over the bridge's delay.\n")
	}
	if len(c.Tests) > 0 {
		fmt.Fprintf(&md, "Tests: only %s.\n", strings.Join(c.Tests, ", "))
	}
	if len(c.Floods) > 0 {
		md.WriteString(floodHeader(c))
	}
	md.WriteString("\n")
	return md.String()
}
