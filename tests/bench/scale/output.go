package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/yip-router/yip-router/internal/benchenv"
)

type meta struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	benchenv.Host
	WGVersion string  `json:"wireguard_go_version,omitempty"`
	Config    *config `json:"config"`
}

func newMeta(c *config) *meta {
	m := &meta{Started: time.Now(), Config: c, Host: benchenv.Describe(c.commit)}
	if c.WG != "" {
		m.WGVersion = benchenv.FirstLine(exec.Command(c.WG, "--version").Output())
	}
	return m
}

func orNone(s string) string {
	if s == "" {
		return "unpinned"
	}
	return s
}

// markdown renders the run as a header and one table per part.
func markdown(c *config, m *meta, r *Result) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# bench-scale %s\n\n", m.Started.Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "yip-router %s; %d simulated peers; hub `--shards %d` on CPUs %s, generator on CPUs %s; source ports %s; kernel %s; %d CPUs (%s).\n\n",
		m.Commit, c.Peers, c.Shards, orNone(c.HubCPUs), orNone(c.GenCPUs), map[bool]string{false: "one port (low bits 0)", true: "low bits spread over the hub's shards"}[c.Spread],
		m.Kernel, m.CPUs, m.CPUModel)
	if m.WGVersion != "" {
		fmt.Fprintf(&b, "The burst again with %s as the hub (`-wg`), after yip-router's phases: a fresh hub namespace of the same topology, the same CPUs, the same generator and peers' behaviour.\n\n", m.WGVersion)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "**Run failed:** %s (the figures below are what was measured before).\n\n", r.Error)
	}
	b.WriteString("## Start and idle memory\n\n| configured peers | ready (ms) | RSS (KiB) | hub CPU to then (s) |\n|---:|---:|---:|---:|\n")
	for _, s := range r.Start {
		fmt.Fprintf(&b, "| %d | %.0f | %d | %.2f |\n", s.Peers, s.ReadyMs, s.RSSKiB, s.CPUSec)
	}
	fmt.Fprintf(&b, "\nRSS per idle configured peer (RSS_N − RSS_1)/(N−1): **%.2f KiB**. Ready = process start until `show --dump` answers; RSS = VmRSS 2 s later.\n", r.RSSPerIdlePeerKiB)
	if len(r.Start) > 0 {
		fmt.Fprintf(&b, "Command: `%s`\n", r.Start[len(r.Start)-1].Command)
	}
	b.WriteString("\n## Handshakes\n\n| run | completed | last session (s) | handshakes/s | hub CPU (s) | per hub CPU-s | generator CPU (s) | sent | cookie replies | timeout retries | p50 / p99 latency (ms) | hub: answered / cookies / capped / rate-limited | hub UDP RcvbufErrors | hub busy after (s / CPU-s) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	hs := []HSResult{r.Burst}
	if r.WGBurst != nil {
		hs = append(hs, *r.WGBurst)
	}
	if r.Paced != nil {
		hs = append(hs, *r.Paced)
	}
	for _, h := range hs {
		if h.Peers == 0 {
			continue
		}
		hub := "– / – / – / –" // a hub without counters
		if c := h.Hub; c != nil {
			hub = fmt.Sprintf("%d / %d / %d / %d", c.Answered, c.CookieDemanded, c.CookieCapped, c.RateLimited)
		}
		fmt.Fprintf(&b, "| %s | %d/%d | %.2f | %.0f | %.2f | %.0f | %.2f | %d | %d | %d | %.0f / %.0f | %s | %d | %.0f / %.1f |\n",
			h.Name, h.Completed, h.Peers, h.LastDoneS, h.PerSec, h.HubCPUSec, h.PerHubCPUSec, h.GenCPUSec, h.Sent, h.Cookies, h.Timeouts,
			h.LatencyP50Ms, h.LatencyP99Ms, hub, h.HubUDP["RcvbufErrors"], h.SettleS, h.SettleCPUSec)
	}
	for _, h := range hs {
		if len(h.Timeline) > 0 {
			fmt.Fprintf(&b, "\n%s, sessions completed per second: %v", h.Name, h.Timeline)
		}
	}
	if r.Burst.Command != "" {
		fmt.Fprintf(&b, "\n\nHub: `%s`. Handshakes/s = completed / time of the last completion; the generator answers a cookie reply at once with a new initiation carrying mac2. In the burst it opens the hub's responses only after the phase (%d opened under none of its initiations and are not counted).\n", r.Burst.Command, r.Burst.ResponsesRefused)
	}
	if w := r.WGBurst; w != nil {
		fmt.Fprintf(&b, "\nwireguard-go: `%s`. Its peers are WireGuard initiators (one initiation in flight, as WireGuard keeps: a response or cookie reply counts only for the latest); %d kept responses did not open. It keeps no handshake counters (–).\n", w.Command, w.ResponsesRefused)
		fmt.Fprintf(&b, "\n**Burst, handshakes per hub CPU-second: yip-router / wireguard-go = %.2f** (%.0f / %.0f).\n", r.BurstVsWG, r.Burst.PerHubCPUSec, w.PerHubCPUSec)
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(&b, "\nCrypto ceiling, this run: **%.0f handshakes per CPU-second** (median of passes %.0f handshakes per CPU-second, half before the burst, half after; %d answered per pass, on CPUs %q: %s). The burst's %.0f per hub CPU-second are **%.0f%%** of it.\n",
			c.PerCPUSec, c.Passes, c.Handshakes, c.CPUs, c.Method, r.Burst.PerHubCPUSec, 100*div(r.Burst.PerHubCPUSec, c.PerCPUSec))
	}
	b.WriteString("\n## Traffic: one ping per peer through its session\n\n| when | answered | RTT p50 / p99 / max (ms) | wall (s) | hub CPU (s) | generator CPU (s) |\n|---|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Traffic {
		fmt.Fprintf(&b, "| %s | %d/%d | %.1f / %.1f / %.1f | %.2f | %.2f | %.2f |\n", p.When, p.Answered, p.Peers, p.RTTP50Ms, p.RTTP99Ms, p.RTTMaxMs, p.WallS, p.HubCPUSec, p.GenCPUSec)
	}
	fmt.Fprintf(&b, "\nRSS idle with N peers %d KiB, after the pings %d KiB: **%.2f KiB per active lane**; at the end %d KiB.\n", r.RSSIdleKiB, r.RSSAfterTrafficKiB, r.RSSPerActiveLaneKiB, r.RSSEndKiB)
	fmt.Fprintf(&b, "Hub CPU while idle with N configured peers: %.2f cores without sessions, %.2f cores with the sessions up (no traffic).\n", r.IdleCoresNoSessions, r.IdleCoresSessions)
	b.WriteString("\n## Status and metrics with N peers\n\n| when | show --json (ms) | bytes | metrics scrape (ms) | bytes |\n|---|---:|---:|---:|---:|\n")
	for _, q := range r.Queries {
		fmt.Fprintf(&b, "| %s | %.0f | %d | %.0f | %d |\n", q.When, q.ShowMs, q.ShowBytes, q.ScrapeMs, q.ScrapeBytes)
	}
	if len(r.Queries) > 0 {
		fmt.Fprintf(&b, "\nCommands: `%s` (wall time includes `ip netns exec` and the CLI's start); %s.\n", r.Queries[0].ShowCommand, r.Queries[0].ScrapeCommand)
	}
	if rl := r.Reload; rl != nil {
		b.WriteString("\n## SIGHUP reload (peer 0's AllowedIPs changed)\n\n")
		fmt.Fprintf(&b, "| reload wall (ms) | hub CPU (s) | sample re-pinged without handshake | peers whose handshake count changed | peer 0 AllowedIPs after |\n|---:|---:|---:|---:|---|\n| %.0f | %.2f | %d/%d | %d | %s |\n",
			rl.WallMs, rl.HubCPUSec, rl.SampleAnswered, rl.Sample, rl.HandshakeChanged, rl.Peer0AllowedIPs)
		fmt.Fprintf(&b, "\nCommand: `%s`. Log: `%s`\n", rl.Command, rl.LogLine)
	}
	return b.String()
}

// report prints the tables and writes scale-STAMP.json and .md under c.out.
func report(c *config, m *meta, r *Result) error {
	m.Finished = time.Now()
	md := markdown(c, m, r)
	fmt.Print("\n" + md)
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(struct {
		Meta   *meta   `json:"meta"`
		Result *Result `json:"result"`
	}{m, r}, "", "  ")
	if err != nil {
		return err
	}
	base := filepath.Join(c.out, "scale-"+m.Started.Format("20060102-1504"))
	if err := os.WriteFile(base+".json", append(raw, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nraw results: %s.json, table: %s.md\n", base, base)
	return nil
}
