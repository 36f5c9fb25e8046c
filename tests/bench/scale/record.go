package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/yip-router/yip-router/router"
)

// Result is everything one run measured (the raw results file).
type Result struct {
	Error string `json:"error,omitempty"`
	// Start time and idle RSS with 0, 1 and N configured peers.
	Start             []StartRun `json:"start"`
	RSSPerIdlePeerKiB float64    `json:"rss_per_idle_peer_kib"`
	RSSIdleKiB        int64      `json:"rss_idle_kib"` // N peers, before any handshake
	Burst             HSResult   `json:"burst"`
	// WGBurst is the same burst against wireguard-go as the hub (-wg),
	// after yip-router's phases; BurstVsWG is yip-router's handshakes
	// per hub CPU-second over wireguard-go's.
	WGBurst   *HSResult `json:"wireguard_go_burst,omitempty"`
	BurstVsWG float64   `json:"burst_per_hub_cpu_s_yip_over_wireguard_go,omitempty"`
	// Ceiling is the responder's crypto alone, measured in this run
	// (ceiling.go); the burst's handshakes per hub CPU-second are set
	// against it.
	Ceiling *Ceiling     `json:"crypto_ceiling,omitempty"`
	Paced   *HSResult    `json:"paced,omitempty"`
	Traffic []PingResult `json:"traffic"`
	// RSS after every peer's session carried a ping; per active lane =
	// (after - idle) / N.
	RSSAfterTrafficKiB  int64   `json:"rss_after_traffic_kib"`
	RSSPerActiveLaneKiB float64 `json:"rss_per_active_lane_kib"`
	RSSEndKiB           int64   `json:"rss_end_kib"`
	// Hub CPU in cores over 3 s with N peers and no traffic: before any
	// handshake, and after the first pings (sessions up, idle).
	IdleCoresNoSessions float64       `json:"idle_cores_no_sessions"`
	IdleCoresSessions   float64       `json:"idle_cores_with_sessions"`
	Queries             []Query       `json:"queries"`
	Reload              *ReloadResult `json:"reload,omitempty"`
	HubLogTail          []string      `json:"hub_log_tail,omitempty"`
}

// StartRun is the hub started with Peers configured peers.
type StartRun struct {
	Peers   int     `json:"peers"`
	ReadyMs float64 `json:"ready_ms"` // process start until show --dump answers
	RSSKiB  int64   `json:"rss_kib"`  // VmRSS 2 s after ready
	CPUSec  float64 `json:"cpu_s"`    // hub CPU by then
	Command string  `json:"command"`
}

// HSResult is one handshake phase.
type HSResult struct {
	Name         string  `json:"name"`
	Peers        int     `json:"peers"`
	Rate         int     `json:"rate,omitempty"` // initiations started per second (0: all at once)
	Completed    int     `json:"completed"`
	WallS        float64 `json:"wall_s"`      // until every peer finished or gave up
	LastDoneS    float64 `json:"last_done_s"` // until the last session completed
	PerSec       float64 `json:"handshakes_per_s"`
	HubCPUSec    float64 `json:"hub_cpu_s"`
	PerHubCPUSec float64 `json:"handshakes_per_hub_cpu_s"`
	GenCPUSec    float64 `json:"gen_cpu_s"`
	Sent         int64   `json:"initiations_sent"`
	Cookies      int64   `json:"cookie_replies"`
	Timeouts     int64   `json:"timeout_retries"`
	GaveUp       int64   `json:"gave_up"`
	// ResponsesRefused: burst responses (kept unopened until the
	// phase's clocks stopped) that opened under none of the peer's
	// initiations; not counted as completed.
	ResponsesRefused int   `json:"responses_refused,omitempty"`
	Other            int64 `json:"other_datagrams"`
	SendErrs         int64 `json:"send_errors"`
	ReadErrs         int64 `json:"read_errors"`
	// PeersByCookies[k]: peers that completed after k cookie replies
	// (last: k or more).
	PeersByCookies []int64 `json:"peers_by_cookie_replies"`
	LatencyP50Ms   float64 `json:"latency_p50_ms"` // per peer, its first initiation to its session
	LatencyP99Ms   float64 `json:"latency_p99_ms"`
	LatencyMaxMs   float64 `json:"latency_max_ms"`
	// Timeline[s]: sessions completed in second s of the phase.
	Timeline []int `json:"completed_per_second"`
	// After the phase: seconds until the hub was idle again (its backlog
	// of queued initiations) and the CPU it spent meanwhile.
	SettleS      float64          `json:"settle_s"`
	SettleCPUSec float64          `json:"settle_hub_cpu_s"`
	Hub          *HSCounts        `json:"hub_counters,omitempty"` // show --json handshakes, after - before (yip-router only)
	HubUDP       map[string]int64 `json:"hub_udp_snmp"`           // /proc/net/snmp Udp: in the hub namespace, after - before
	Command      string           `json:"hub_command"`
}

// HSCounts are router.HandshakeCounts differences.
type HSCounts struct {
	Initiated, Completed, Answered, CookieDemanded, Refused, RateLimited, CookieCapped int64
}

func diffHS(a, b router.HandshakeCounts) HSCounts {
	d := func(x, y uint64) int64 { return int64(y) - int64(x) }
	return HSCounts{
		Initiated: d(a.Initiated, b.Initiated), Completed: d(a.Completed, b.Completed), Answered: d(a.Answered, b.Answered),
		CookieDemanded: d(a.CookieDemanded, b.CookieDemanded), Refused: d(a.Refused, b.Refused),
		RateLimited: d(a.RateLimited, b.RateLimited), CookieCapped: d(a.CookieCapped, b.CookieCapped),
	}
}

func diffMap(a, b map[string]int64) map[string]int64 {
	if a == nil || b == nil {
		return nil
	}
	m := map[string]int64{}
	for k, v := range b {
		if d := v - a[k]; d != 0 {
			m[k] = d
		}
	}
	return m
}

func (r HSResult) summary() string {
	return fmt.Sprintf("%s: %d/%d sessions, last at %.2f s (%.0f/s), hub CPU %.2f s (%.0f per CPU-s), gen CPU %.2f s, %d sent, %d cookie replies, %d timeout retries, p50 %.0f ms p99 %.0f ms, hub %+v, udp %v",
		r.Name, r.Completed, r.Peers, r.LastDoneS, r.PerSec, r.HubCPUSec, r.PerHubCPUSec, r.GenCPUSec, r.Sent, r.Cookies, r.Timeouts, r.LatencyP50Ms, r.LatencyP99Ms, r.hubCounts(), r.HubUDP)
}

// hubCounts prints Hub, or a dash for a hub without counters.
func (r HSResult) hubCounts() string {
	if r.Hub == nil {
		return "-"
	}
	return fmt.Sprintf("%+v", *r.Hub)
}

// PingResult is one traffic phase: one ping per peer with a session.
type PingResult struct {
	When        string  `json:"when"`
	Peers       int     `json:"peers"`
	WithSession int     `json:"with_session"`
	Answered    int     `json:"answered"`
	WallS       float64 `json:"wall_s"`
	RTTP50Ms    float64 `json:"rtt_p50_ms"`
	RTTP99Ms    float64 `json:"rtt_p99_ms"`
	RTTMaxMs    float64 `json:"rtt_max_ms"`
	HubCPUSec   float64 `json:"hub_cpu_s"`
	GenCPUSec   float64 `json:"gen_cpu_s"`
	Control     int64   `json:"control_frames_seen"`
	Parity      int64   `json:"parity_seen"`
	OtherData   int64   `json:"other_data_seen"`
	BadTag      int64   `json:"not_this_session"`
	OpenErrs    int64   `json:"open_errors"`
}

func (r PingResult) summary() string {
	return fmt.Sprintf("ping %s: %d/%d answered (%d with a session) in %.2f s, RTT p50 %.1f ms p99 %.1f ms max %.1f ms, hub CPU %.2f s, gen CPU %.2f s; seen: %d control, %d parity, %d other data, %d not this session, %d open errors",
		r.When, r.Answered, r.Peers, r.WithSession, r.WallS, r.RTTP50Ms, r.RTTP99Ms, r.RTTMaxMs, r.HubCPUSec, r.GenCPUSec, r.Control, r.Parity, r.OtherData, r.BadTag, r.OpenErrs)
}

// Query is show --json and a metrics scrape at one moment.
type Query struct {
	When          string  `json:"when"`
	ShowMs        float64 `json:"show_json_ms"`
	ShowBytes     int     `json:"show_json_bytes"`
	ShowCommand   string  `json:"show_command"`
	ScrapeMs      float64 `json:"scrape_ms"`
	ScrapeBytes   int     `json:"scrape_bytes"`
	ScrapeCommand string  `json:"scrape_command"`
	Err           string  `json:"error,omitempty"`
}

// ReloadResult is the SIGHUP reload with one peer's AllowedIPs changed.
type ReloadResult struct {
	WallMs           float64  `json:"wall_ms"` // SIGHUP until the log line
	HubCPUSec        float64  `json:"hub_cpu_s"`
	LogLine          string   `json:"log_line"`
	Sample           int      `json:"sample"`
	SampleAnswered   int      `json:"sample_answered"`
	HandshakeChanged int      `json:"peers_handshakes_changed"`
	Peer0Changed     bool     `json:"peer0_handshakes_changed"`
	Peer0AllowedIPs  string   `json:"peer0_allowed_ips"`
	HubTotalsDiff    HSCounts `json:"hub_counters"`
	Command          string   `json:"command"`
}

// percentiles returns p50, p99 and max of ds in milliseconds.
func percentiles(ds []time.Duration) (p50, p99, mx float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return ms(s[i])
	}
	return at(0.5), at(0.99), ms(s[len(s)-1])
}

// timeline counts the nonzero durations per bucket.
func timeline(ds []time.Duration, bucket time.Duration) []int {
	var out []int
	for _, d := range ds {
		if d <= 0 {
			continue
		}
		b := int(d / bucket)
		for len(out) <= b {
			out = append(out, 0)
		}
		out[b]++
	}
	return out
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
