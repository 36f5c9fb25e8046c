package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/router"
)

func snapshot(uptime time.Duration, c0, c1 map[string]uint64, laneRx, laneTx uint64) *router.Status {
	return &router.Status{
		Interface: "yip0", Uptime: uptime,
		Shards: []router.ShardStatus{{ID: 0, CPU: 2, Counters: c0}, {ID: 1, CPU: 3, Counters: c1}},
		Peers: []router.PeerStatus{{PublicKey: "aNIXAzi6ximvC5aN6U9ySX345YxOa6gtHjBu6FsZxVM=", Lanes: []router.LaneStatus{
			{Index: 0, Shard: 0, Remote: "192.0.2.2:51820", FEC: "16:2", RxPackets: laneRx, RxBytes: laneRx * 1000, TxPackets: laneTx, TxBytes: laneTx * 500},
		}}},
	}
}

func TestRates(t *testing.T) {
	prev := snapshot(10*time.Second,
		map[string]uint64{"udp_in": 1000, "udp_out": 500, "bytes_in": 1_000_000, "bytes_out": 0, "tun_in": 10, "drop_bad_tag": 4, "drop_replay": 1},
		map[string]uint64{"udp_in": 50}, 100, 200)
	cur := snapshot(12*time.Second,
		map[string]uint64{"udp_in": 3000, "udp_out": 1500, "bytes_in": 3_500_000, "bytes_out": 250_000, "tun_in": 30, "tun_out": 8, "drop_bad_tag": 10, "drop_replay": 3, "drop_no_route": 2},
		map[string]uint64{"udp_in": 20}, 2100, 1200) // shard 1's counter went back: a restart
	// The routers' uptimes say 2 s passed, whatever the wall clock says.
	dt := interval(prev, cur, 5*time.Second)
	if dt != 2*time.Second {
		t.Fatalf("interval = %s, want 2s", dt)
	}
	sh, ln := rates(prev, cur, dt)
	want0 := shardRate{ID: 0, CPU: 2, PktIn: 1000, PktOut: 500, BitsIn: 10_000_000, BitsOut: 1_000_000, TunIn: 10, TunOut: 4, Drops: 5}
	if len(sh) != 2 || sh[0] != want0 {
		t.Fatalf("shard 0 = %+v\nwant      %+v", sh[0], want0)
	}
	if sh[1].PktIn != 10 { // 20 since the restart, over 2 s
		t.Errorf("shard 1 after a counter reset: %v pkt/s, want 10", sh[1].PktIn)
	}
	if len(ln) != 1 {
		t.Fatalf("lanes: %+v", ln)
	}
	l := ln[0]
	if l.PktIn != 1000 || l.BitsIn != 8e6 || l.PktOut != 500 || l.BitsOut != 2e6 || l.Remote != "192.0.2.2:51820" {
		t.Errorf("lane rate %+v", l)
	}
	// Uptime that did not advance (or went back): the wall clock.
	if d := interval(cur, prev, 3*time.Second); d != 3*time.Second {
		t.Errorf("interval with uptime going back = %s", d)
	}
}

func TestSI(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0 pkt/s"}, {999, "999 pkt/s"}, {1500, "1.5 kpkt/s"}, {2.5e6, "2.50 Mpkt/s"}, {9.41e9, "9.41 Gpkt/s"}, {math.SmallestNonzeroFloat64, "0 pkt/s"}} {
		if got := si(c.v, "pkt/s"); got != c.want {
			t.Errorf("si(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// watch with a fake control socket: count refreshes, a clear-screen and a
// rate line for each shard and lane each time, errors shown in place.
func TestWatchLoop(t *testing.T) {
	n := 0
	queryStatus = func(path string) (*router.Status, error) {
		if path == "/gone.sock" {
			return nil, errors.New("no router is running on /gone.sock")
		}
		n++
		k := uint64(n)
		return snapshot(time.Duration(n)*time.Second,
			map[string]uint64{"udp_in": 1000 * k, "bytes_in": 1_000_000 * k},
			map[string]uint64{"udp_out": 10 * k, "drop_replay": k}, 50*k, 0), nil
	}
	defer func() { queryStatus = router.QueryStatus }()
	var out bytes.Buffer
	if code := watch(&out, []string{"/r.sock", "/gone.sock"}, 10*time.Millisecond, 2, true); code != 0 {
		t.Fatalf("exit %d", code)
	}
	s := out.String()
	if c := strings.Count(s, clearScreen); c != 2 {
		t.Errorf("%d screens, want 2", c)
	}
	// Compare lines with runs of spaces folded (the columns' widths are
	// layout, not content).
	var folded []string
	for _, l := range strings.Split(s, "\n") {
		folded = append(folded, strings.Join(strings.Fields(l), " "))
	}
	all := strings.Join(folded, "\n")
	for _, want := range []string{
		"SHARD CPU UDP IN IN BITS UDP OUT OUT BITS TUN IN TUN OUT DROPS",
		"shard 0 2 1.0 kpkt/s 8.00 Mbit/s 0 pkt/s 0 bit/s 0 pkt/s 0 pkt/s 0 /s",
		"shard 1 3 0 pkt/s 0 bit/s 10 pkt/s 0 bit/s 0 pkt/s 0 pkt/s 1 /s",
		"total 1.0 kpkt/s 8.00 Mbit/s 10 pkt/s 0 bit/s 0 pkt/s 0 pkt/s 1 /s",
		"lane 0 shard 0 peer aNIXAzi6… → 192.0.2.2:51820 rx 50 pkt/s 400.0 kbit/s tx 0 pkt/s 0 bit/s fec 16:2",
		"/gone.sock: no router is running on /gone.sock",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in:\n%s", want, s)
		}
	}
}

// Into a pipe (not a terminal) watch writes no screen codes: each refresh
// is a plain record after the last, and show decides by its stdout.
func TestWatchPlainIntoPipe(t *testing.T) {
	queryStatus = func(string) (*router.Status, error) {
		return snapshot(time.Second, map[string]uint64{"udp_in": 1}, map[string]uint64{}, 1, 0), nil
	}
	defer func() { queryStatus = router.QueryStatus }()
	var out bytes.Buffer
	if code := watch(&out, []string{"/r.sock"}, 10*time.Millisecond, 2, false); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(out.String(), "\x1b") {
		t.Fatalf("escape codes in plain output: %q", out.String())
	}
	if c := strings.Count(out.String(), "yip-router show --watch"); c != 2 {
		t.Fatalf("%d refresh headers, want 2", c)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&out) {
		t.Fatal("a pipe or a buffer taken for a terminal")
	}
}
