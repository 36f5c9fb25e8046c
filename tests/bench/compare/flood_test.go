package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseFloods(t *testing.T) {
	for _, c := range []struct {
		in, want string
		err      bool
	}{
		{"", "", false},
		{"all", "garbage init replay", false},
		{"replay,garbage", "garbage replay", false},
		{"init, init", "init", false},
		{"garbage,syn", "", true},
	} {
		got, err := parseFloods(c.in)
		if (err != nil) != c.err || strings.Join(got, " ") != c.want {
			t.Errorf("parseFloods(%q) = %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestFloodSpecs(t *testing.T) {
	c := &config{CCs: []string{"bbr", "cubic"}, UDPLen: 1360, Rate: "1G"}
	for _, s := range testSpecs(c) {
		if s.flood != "" {
			t.Fatalf("flood test %s without -floods", s.name)
		}
	}
	c.Floods = []string{floodGarbage, floodReplay}
	got, err := selectTests(testSpecs(c), []string{"flood"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.name)
		if strings.Join(s.args, " ") != "-P 1 -C bbr" {
			t.Errorf("%s: iperf3 args %q, want one flow under the first CC", s.name, s.args)
		}
		if s.attacked() != (s.flood != floodNone) {
			t.Errorf("%s: attacked %v", s.name, s.attacked())
		}
	}
	if strings.Join(names, " ") != "flood-none flood-garbage flood-replay" {
		t.Errorf("-tests flood selects %q", names)
	}
	if err := checkTests(&config{CCs: []string{"cubic"}, UDPLen: 1360, Rate: "1G", Tests: []string{"flood"}}); err == nil || !strings.Contains(err.Error(), "-floods") {
		t.Errorf("-tests flood without -floods: %v", err)
	}
	if err := checkTests(c); err != nil {
		t.Errorf("-floods with every test: %v", err)
	}
}

func TestFloodRatios(t *testing.T) {
	r := Record{Flood: floodInit, RecvGbps: 1.2, MatchedGbps: 1.6, UnfloodedGbps: 2.4, FloodPPS: 70000, MatchedPPS: 80000}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"flood/matched", r.FloodVsMatched(), 0.75},
		{"flood/unflooded", r.FloodVsUnflooded(), 0.5},
		{"matched/unflooded", r.MatchedVsUnflooded(), 2.0 / 3},
		{"rate flood/matched", r.RateVsMatched(), 0.875},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Ratios that do not apply are NaN (a "—" cell, out of the medians).
	for _, r := range []Record{
		{Flood: floodNone, RecvGbps: 2},
		{RecvGbps: 2, MatchedGbps: 1},
		{Flood: floodGarbage, RecvGbps: 1}, // no baseline, no unflooded flow
	} {
		if v := r.FloodVsMatched(); !math.IsNaN(v) {
			t.Errorf("%+v: flood/matched %v, want NaN", r, v)
		}
		if v := r.FloodVsUnflooded(); !math.IsNaN(v) {
			t.Errorf("%+v: flood/unflooded %v, want NaN", r, v)
		}
		if v := r.MatchedVsUnflooded(); !math.IsNaN(v) {
			t.Errorf("%+v: matched/unflooded %v, want NaN", r, v)
		}
	}
	if v := (Record{Flood: floodGarbage, RecvGbps: 1, MatchedGbps: 2}).MatchedVsUnflooded(); !math.IsNaN(v) {
		t.Errorf("matched/unflooded without the unflooded flow: %v", v)
	}
}

func TestTableFloodRows(t *testing.T) {
	var recs []Record
	// Three rounds: per-round ratios 0.5, 0.6, 0.7 for wireguard-go and
	// 0.9, 0.8, 1.0 for yip-router; their medians 0.6 and 0.9.
	for i, v := range []struct{ wg, yip float64 }{{0.5, 0.9}, {0.6, 0.8}, {0.7, 1.0}} {
		for _, x := range []struct {
			impl  string
			ratio float64
		}{{implWG, v.wg}, {implYip, v.yip}} {
			recs = append(recs,
				Record{Round: i + 1, Impl: x.impl, Placement: placeUnpinned, Test: "flood-none", Flood: floodNone, RecvGbps: 2, WindowSec: 1, RxCPUSec: 1},
				Record{Round: i + 1, Impl: x.impl, Placement: placeUnpinned, Test: "flood-garbage", Flood: floodGarbage,
					RecvGbps: x.ratio, MatchedGbps: 1, UnfloodedGbps: 2, FloodSent: 100000, FloodPPS: 50000, MatchedPPS: 50000, WindowSec: 1, RxCPUSec: 1})
		}
	}
	tab := Table(recs, []string{"flood-none", "flood-garbage"}, []string{placeUnpinned})
	for _, want := range []string{
		"| TCP ×1, no flood | unpinned | goodput | 2.00 Gbit/s | 2.00 Gbit/s | 1.00× |",
		"| TCP ×1 under garbage | unpinned | goodput | 0.60 Gbit/s | 0.90 Gbit/s | 1.50× |",
		"|  |  | goodput, same flood to a closed port (CPU-matched baseline) | 1.00 Gbit/s | 1.00 Gbit/s | 1.00× |",
		"|  |  | goodput under the flood / CPU-matched baseline | 0.60 | 0.90 | 1.50× |",
		"|  |  | goodput under the flood / unflooded | 0.30 | 0.45 | 1.50× |",
		"|  |  | attacker datagrams/s under the flood | 50000 | 50000 | 1.00× |",
		"|  |  | attacker rate under the flood / CPU-matched baseline | 1.00 | 1.00 | 1.00× |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	// The unflooded flow is a TCP row: no flood metrics under it.
	none := tab[strings.Index(tab, "TCP ×1, no flood"):strings.Index(tab, "TCP ×1 under garbage")]
	if strings.Contains(none, "CPU-matched") || !strings.Contains(none, "retransmits") {
		t.Errorf("the unflooded flow's rows:\n%s", none)
	}
}

func TestFloodTitles(t *testing.T) {
	for in, want := range map[string]string{"flood-none": "TCP ×1, no flood", "flood-init": "TCP ×1 under spoofed initiations", "flood-x": "flood-x"} {
		if got := testTitle(in); got != want {
			t.Errorf("testTitle(%q) = %q, want %q", in, got, want)
		}
	}
	if kindOf("flood-none") != kindTCP || kindOf("flood-replay") != kindFlood {
		t.Error("kindOf flood tests")
	}
}

func TestHeaderFloods(t *testing.T) {
	c := &config{Rounds: 1, Duration: 3 * time.Second, Omit: time.Second, MTU: 1410, WGMTU: wgDefaultMTU, UDPLen: 1360, Pings: 50, YipFEC: "auto",
		CCs: []string{"cubic"}, Floods: []string{floodInit, floodReplay}}
	h := header(c, testMeta(c))
	for _, want := range []string{"Flood rows: one TCP flow (iperf3 -P 1 -C cubic)", "UDP port 9", "init (16384 handshake initiations", "replay (up to 2000"} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
	if strings.Contains(h, "garbage (") {
		t.Errorf("header describes a flood not run:\n%s", h)
	}
}
