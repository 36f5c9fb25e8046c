package router

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/buildinfo"
)

type fakeStatus struct{ st Status }

func (f *fakeStatus) Status() Status { return f.st }

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	return string(b)
}

const peerKey = "aNIXAzi6ximvC5aN6U9ySX345YxOa6gtHjBu6FsZxVM="

func TestMetricsExposition(t *testing.T) {
	src := &fakeStatus{Status{
		Interface: "yip0", PublicKey: "mFp+u1F0ie+NngI53dplYbtPSOJtxRRI05vApdO/Fjo=", ListenPort: 51820,
		Uptime: 90 * time.Second,
		Shards: []ShardStatus{
			{ID: 0, CPU: 2, Counters: map[string]uint64{"tun_in": 10, "tun_out": 11, "udp_in": 12, "udp_out": 13, "bytes_in": 1200, "bytes_out": 1300, "drop_bad_tag": 5, "fec_recovered": 3, "foreign_lane": 1, "pool_high_water": 96, "ring_high_water": 32}},
			{ID: 1, CPU: 3, Counters: map[string]uint64{"udp_in": 7, "drop_replay": 2, "parity_out": 4}},
		},
		Handshakes:           HandshakeCounts{Initiated: 4, Completed: 3, Answered: 2, CookieDemanded: 1, Refused: 6},
		ControlEventsDropped: 8,
		LogLinesSampled:      14,
		Peers: []PeerStatus{{
			PublicKey: peerKey, LastHandshake: time.Unix(1700000000, 500_000_000), Handshakes: 3,
			RxBytes: 100, TxBytes: 200, RxPackets: 1, TxPackets: 2, FECRecovered: 3, FECLost: 4,
			Lanes: []LaneStatus{{Index: 0}, {Index: 1}},
		}, {PublicKey: "other"}},
	}}
	out := scrape(t, metricsHandler(src, false))
	want := []string{
		`yip_router_info{interface="yip0",listen_port="51820",public_key="mFp+u1F0ie+NngI53dplYbtPSOJtxRRI05vApdO/Fjo="} 1`,
		`yip_router_uptime_seconds 90`,
		fmt.Sprintf(`yip_build_info{go=%q,version=%q,wire="2"} 1`, runtime.Version(), buildinfo.Version()),
		`yip_router_shards 2`,
		`yip_handshakes_total{event="initiated"} 4`,
		`yip_handshakes_total{event="completed"} 3`,
		`yip_handshakes_total{event="answered"} 2`,
		`yip_handshakes_total{event="cookie_demanded"} 1`,
		`yip_handshakes_total{event="refused"} 6`,
		`yip_control_events_dropped_total 8`,
		`yip_log_lines_sampled_total 14`,
		`yip_shard_tun_packets_total{cpu="2",direction="in",shard="0"} 10`,
		`yip_shard_tun_packets_total{cpu="2",direction="out",shard="0"} 11`,
		`yip_shard_udp_datagrams_total{cpu="2",direction="in",shard="0"} 12`,
		`yip_shard_udp_datagrams_total{cpu="2",direction="out",shard="0"} 13`,
		`yip_shard_udp_datagrams_total{cpu="3",direction="in",shard="1"} 7`,
		`yip_shard_udp_datagrams_total{cpu="3",direction="out",shard="1"} 0`,
		`yip_shard_udp_bytes_total{cpu="2",direction="in",shard="0"} 1200`,
		`yip_shard_udp_bytes_total{cpu="2",direction="out",shard="0"} 1300`,
		`yip_shard_drops_total{cpu="2",reason="bad_tag",shard="0"} 5`,
		`yip_shard_drops_total{cpu="2",reason="replay",shard="0"} 0`,
		`yip_shard_drops_total{cpu="3",reason="replay",shard="1"} 2`,
		`yip_shard_drops_total{cpu="3",reason="no_route",shard="1"} 0`,
		`yip_shard_fec_recovered_total{cpu="2",shard="0"} 3`,
		`yip_shard_fec_parity_sent_total{cpu="3",shard="1"} 4`,
		`yip_shard_foreign_lane_total{cpu="2",shard="0"} 1`,
		`yip_shard_handed_off_total{cpu="2",shard="0"} 0`,
		`yip_shard_control_frames_total{cpu="2",direction="in",shard="0"} 0`,
		`yip_peer_rx_bytes_total{peer="` + peerKey + `"} 100`,
		`yip_peer_tx_bytes_total{peer="` + peerKey + `"} 200`,
		`yip_peer_rx_packets_total{peer="` + peerKey + `"} 1`,
		`yip_peer_tx_packets_total{peer="` + peerKey + `"} 2`,
		`yip_peer_fec_recovered_total{peer="` + peerKey + `"} 3`,
		`yip_peer_fec_unrecovered_total{peer="` + peerKey + `"} 4`,
		`yip_peer_handshakes_total{peer="` + peerKey + `"} 3`,
		`yip_peer_last_handshake_seconds{peer="` + peerKey + `"} 1.7000000005e+09`,
		`yip_peer_lanes{peer="` + peerKey + `"} 2`,
		`yip_peer_last_handshake_seconds{peer="other"} 0`,
		`yip_peer_lanes{peer="other"} 0`,
		`yip_shard_pool_buffers_high_water{cpu="2",shard="0"} 96`,
		`yip_shard_ring_occupancy_high_water{cpu="2",shard="0"} 32`,
		`# TYPE yip_shard_pool_buffers_high_water gauge`,
		`# TYPE yip_shard_ring_occupancy_high_water gauge`,
		`# TYPE yip_shard_drops_total counter`,
		`# TYPE yip_peer_last_handshake_seconds gauge`,
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("missing line %s", w)
		}
	}
	// No other families: runtime metrics are off here, and no counter
	// leaks out under an ad-hoc name.
	for l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if !strings.HasPrefix(l, "yip_") {
			t.Errorf("unexpected line %q", l)
		}
		if strings.HasPrefix(l, "yip_shard_drop_") {
			t.Errorf("drop counter outside yip_shard_drops_total: %q", l)
		}
	}
	if t.Failed() {
		t.Logf("exposition:\n%s", out)
	}
}

// Each scrape reads a fresh Status (counters go up between scrapes), and
// the runtime collectors come along when asked for.
func TestMetricsFreshPerScrape(t *testing.T) {
	src := &fakeStatus{Status{Shards: []ShardStatus{{ID: 0, CPU: 0, Counters: map[string]uint64{"udp_in": 1}}}}}
	h := metricsHandler(src, true)
	if out := scrape(t, h); !strings.Contains(out, `yip_shard_udp_datagrams_total{cpu="0",direction="in",shard="0"} 1`+"\n") || !strings.Contains(out, "go_goroutines ") {
		t.Fatalf("first scrape:\n%s", out)
	}
	src.st.Shards[0].Counters = map[string]uint64{"udp_in": 42}
	if out := scrape(t, h); !strings.Contains(out, `yip_shard_udp_datagrams_total{cpu="0",direction="in",shard="0"} 42`+"\n") {
		t.Fatalf("second scrape did not see the new value:\n%s", out)
	}
}
