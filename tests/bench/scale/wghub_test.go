package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/netns"
)

// wgBinary is wireguard-go for the root test: $YIP_WG_GO, else the
// Makefile's pinned build, bin/wireguard-go-$(WG_GO_VERSION).
func wgBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("YIP_WG_GO"); p != "" {
		return p
	}
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Skip("no Makefile to find wireguard-go's version in; set YIP_WG_GO: ", err)
	}
	v := regexp.MustCompile(`(?m)^WG_GO_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
	if v == nil {
		t.Skip("no WG_GO_VERSION in the Makefile; set YIP_WG_GO")
	}
	p, _ := filepath.Abs("../../../bin/wireguard-go-" + string(v[1]))
	if _, err := os.Stat(p); err != nil {
		t.Skipf("wireguard-go not built (make bin/wireguard-go-%s, or set YIP_WG_GO): %v", v[1], err)
	}
	return p
}

// The burst against the real wireguard-go: every peer completes and every
// response opens.
func TestWGBurstAgainstWireguardGo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and wireguard-go's TUN")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	c := &config{Peers: 50, Shards: 1, BurstTimeout: 10 * time.Second, WG: wgBinary(t)}
	r, err := wgBurst(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.summary())
	if r.Completed != c.Peers || r.ResponsesRefused != 0 || r.GaveUp != 0 || r.SendErrs != 0 || r.ReadErrs != 0 {
		t.Fatalf("%d/%d completed, %d responses refused, %d gave up, %d send and %d read errors",
			r.Completed, c.Peers, r.ResponsesRefused, r.GaveUp, r.SendErrs, r.ReadErrs)
	}
	if r.HubCPUSec <= 0 || r.Hub != nil {
		t.Fatalf("hub CPU %.2f s, counters %v: want some CPU and no counters", r.HubCPUSec, r.Hub)
	}
}

// The table carries wireguard-go's burst as its own row, dashes for the
// counters it does not keep, and the ratio.
func TestMarkdownWGRow(t *testing.T) {
	c := &config{Peers: 100, Shards: 1, WG: "/bin/wireguard-go"}
	m := &meta{Started: time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), WGVersion: "wireguard-go v0.0.20250522", Config: c}
	r := &Result{
		Burst: HSResult{Name: "burst (all at once)", Peers: 100, Completed: 100, PerHubCPUSec: 3000, Hub: &HSCounts{Answered: 100}},
		WGBurst: &HSResult{Name: "wireguard-go: burst (all at once)", Peers: 100, Completed: 99, PerHubCPUSec: 2000, Cookies: 100,
			HubUDP: map[string]int64{"RcvbufErrors": 7}, Command: "wireguard-go -f x"},
		BurstVsWG: 1.5,
	}
	md := markdown(c, m, r)
	for _, want := range []string{
		"| wireguard-go: burst (all at once) | 99/100 | ",
		" | 2000 | ",
		"| – / – / – / – | 7 |",
		"| 100 / 0 / 0 / 0 |",
		"yip-router / wireguard-go = 1.50** (3000 / 2000)",
		"wireguard-go v0.0.20250522 as the hub",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}
