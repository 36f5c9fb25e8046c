package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/router"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestParseIperfTCP(t *testing.T) {
	r, err := parseIperf(read(t, "iperf3-tcp-bbr.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.UDP || !near(r.RecvGbps, 1.9966605706801684) || !near(r.SentGbps, 2.0001987239744794) || r.Retransmits != 2 || r.CC != "bbr" || !near(r.RTTms, 0.081) {
		t.Fatalf("got %+v", r)
	}
	// Its one interval is the -O warm-up's.
	if len(r.Intervals) != 1 || !r.Intervals[0].Omitted || !near(r.Intervals[0].CwndKiB, 916762.0/1024) ||
		!near(r.Intervals[0].RTTms, 0.077) || !near(r.Intervals[0].Mbps, 1998.400038277935) {
		t.Fatalf("intervals %+v", r.Intervals)
	}
}

// iperf3 restarts its interval clock when the warm-up ends; the intervals
// read from the flow's start.
func TestParseIperfIntervals(t *testing.T) {
	iv := func(start, end float64, omitted bool) string {
		return fmt.Sprintf(`{"streams":[{"start":%g,"end":%g,"bits_per_second":1e8,"retransmits":1,"snd_cwnd":2048,"rtt":51000,"omitted":%t}]}`, start, end, omitted)
	}
	b := `{"intervals":[` + iv(0, 0.5, true) + "," + iv(0.5, 1, true) + "," + iv(0, 0.5, false) + "," + iv(0.5, 1, false) +
		`],"end":{"sum_sent":{"seconds":1},"sum_received":{"seconds":1,"bits_per_second":1e8}}}`
	r, err := parseIperf([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	var at []float64
	for _, x := range r.Intervals {
		at = append(at, x.Start)
	}
	if !slices.Equal(at, []float64{0, 0.5, 1, 1.5}) || r.Intervals[2].Omitted || !near(r.Intervals[3].RTTms, 51) || r.Intervals[3].CwndKiB != 2 {
		t.Fatalf("intervals %+v", r.Intervals)
	}
}

// testdata/iperf3-udp.json is a loopback run with its receiver sums
// edited to 28 of 1838 datagrams lost.
func TestParseIperfUDP(t *testing.T) {
	r, err := parseIperf(read(t, "iperf3-udp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.UDP || !near(r.RecvGbps, 0.0098454162) || !near(r.LostPct, 100*28.0/1838) || !near(r.IperfLost, 1.5233949945593035) || r.Retransmits != 0 {
		t.Fatalf("got %+v", r)
	}
}

func TestParseIperfError(t *testing.T) {
	_, err := parseIperf(read(t, "iperf3-error.json"))
	if err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("err = %v", err)
	}
	if _, err := parseIperf([]byte("not json")); err == nil {
		t.Fatal("no error for garbage")
	}
}

func TestParseStat(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 50.
	line := "4242 (wireguard-go (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 1000 10"
	got, err := parseStat(line)
	if err != nil || got != 3.0 {
		t.Fatalf("parseStat = %v, %v; want 3 s", got, err)
	}
	if _, err := parseStat("12 (x) S 1"); err == nil {
		t.Fatal("no error for a short line")
	}
	if _, err := cpuSeconds(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestParseSnmp(t *testing.T) {
	m := parseSnmp(string(read(t, "snmp.txt")))
	if m["Tcp.OutSegs"] != 26001 || m["Tcp.RetransSegs"] != 2 || m["Udp.InDatagrams"] != 9405 || m["Udp.RcvbufErrors"] != 0 {
		t.Fatalf("got OutSegs %d RetransSegs %d Udp.InDatagrams %d", m["Tcp.OutSegs"], m["Tcp.RetransSegs"], m["Udp.InDatagrams"])
	}
	if _, ok := m["Tcp.MaxConn"]; ok {
		t.Fatal("negative MaxConn parsed")
	}
}

func TestParseLinkStats(t *testing.T) {
	ls, err := parseLinkStats(read(t, "ip-link.json"))
	if err != nil || ls.TxQLen != 1000 {
		t.Fatalf("got %+v, %v", ls, err)
	}
	if _, err := parseLinkStats([]byte("[]")); err == nil {
		t.Fatal("no error for no device")
	}
}

func TestParsePing(t *testing.T) {
	p := parsePing(string(read(t, "ping.txt")))
	if p.Sent != 3 || p.Received != 3 || len(p.RTTms) != 3 || p.RTTms[1] != 0.050 {
		t.Fatalf("got %+v", p)
	}
	if m := median(p.RTTms); m != 0.052 {
		t.Fatalf("median %v", m)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestTable(t *testing.T) {
	var recs []Record
	for i, g := range []float64{2.0, 3.0, 2.5} {
		recs = append(recs,
			Record{Round: i + 1, Impl: implWG, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: g, WindowSec: 2, RxCPUSec: 2, Retransmits: 10},
			Record{Round: i + 1, Impl: implYip, Placement: placeUnpinned, Test: "tcp1-cubic", RecvGbps: 2 * g, WindowSec: 2, RxCPUSec: 1, Retransmits: 0},
			Record{Round: i + 1, Impl: implWG, Placement: placeUnpinned, Test: "ping", RTTMedianMs: 0.5},
		)
	}
	recs = append(recs, Record{Round: 1, Impl: implYip, Placement: placeUnpinned, Test: "ping", Err: "setup: boom"})
	tab := Table(recs, []string{"tcp1-cubic", "udp-blast", "ping"}, []string{placeUnpinned, placePinned})
	for _, want := range []string{
		"| TCP ×1 cubic | unpinned | goodput | 2.50 Gbit/s | 5.00 Gbit/s | 2.00× |",
		"|  |  | Gbit/s per receiving core | 2.50 Gbit/s | 10.00 Gbit/s | 4.00× |",
		"|  |  | retransmits (iperf3) | 10 | 0 | 0.00× |",
		"| ping RTT | unpinned | RTT median | 0.500 ms | failed ×1 | — |",
	} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if strings.Contains(tab, "UDP blast") || strings.Contains(tab, placePinned) {
		t.Errorf("rows without records:\n%s", tab)
	}
	recs = append(recs, Record{Round: 1, Impl: implWG, Placement: placePinned, Test: "ping", RTTMedianMs: 0.7})
	tab = Table(recs, []string{"ping"}, []string{placePinned})
	if want := "| ping RTT | rx daemon alone on core 0 | RTT median | 0.700 ms | not run | — |"; !strings.Contains(tab, want) {
		t.Errorf("table lacks %q:\n%s", want, tab)
	}
}

func TestTestTitle(t *testing.T) {
	for in, want := range map[string]string{"tcp4-bbr": "TCP ×4 bbr", "udp-1G": "UDP 1Gbit/s offered", "udp-blast": "UDP blast", "ping": "ping RTT"} {
		if got := testTitle(in); got != want {
			t.Errorf("testTitle(%q) = %q, want %q", in, got, want)
		}
	}
}

// pathTopo is a topology whose sender reports the path states of a script,
// one per call, then "clear".
type pathTopo struct {
	topology
	script []string
}

func (p *pathTopo) PathState() (pathSample, bool) {
	if len(p.script) == 0 {
		return pathSample{State: "clear"}, true
	}
	s := p.script[0]
	p.script = p.script[1:]
	return pathSample{State: s}, s != ""
}

// samplePaths counts what the sender reports until its end time (a call
// that reads no status counts nothing), and PathQueuedPct is the share
// judged queued, drained or split; without samples (wireguard-go) it is
// NaN, a dash in the table.
func TestPathStatesSampled(t *testing.T) {
	p := &pathTopo{script: []string{"unknown", "queued", "", "drained", "split"}}
	var latest atomic.Pointer[pathSample]
	m := samplePaths(context.Background(), p, time.Now().Add(8*pathEvery), &latest)
	if l := latest.Load(); l == nil || l.State != "clear" {
		t.Fatalf("latest sample %v, want clear", l)
	}
	clear := m["clear"]
	if m["unknown"] != 1 || m["queued"] != 1 || m["drained"] != 1 || m["split"] != 1 || clear < 1 || len(m) != 5 {
		t.Fatalf("sampled %v, want one each of unknown, queued, drained, split, then clear", m)
	}
	if got, want := (Record{PathStates: m}).PathQueuedPct(), 300/float64(4+clear); math.Abs(got-want) > 1e-9 {
		t.Fatalf("queued, drained or split: %.1f%%, want %.1f%%", got, want)
	}
	if got := (Record{}).PathQueuedPct(); !math.IsNaN(got) {
		t.Fatalf("no samples: %v, want NaN", got)
	}
}

// The busiest lane is the one that sent the most since the last reading,
// not in all: a test after another takes a lane of its own.
func TestBusiestLaneBySent(t *testing.T) {
	st := func(sent ...uint64) *router.Status {
		p := router.PeerStatus{PublicKey: "k"}
		for i, n := range sent {
			p.Lanes = append(p.Lanes, router.LaneStatus{Index: i, TxPackets: n})
		}
		return &router.Status{Peers: []router.PeerStatus{p}}
	}
	var y yipTopo
	if l := y.busiestLane(st(1000, 10)); l != nil {
		t.Fatalf("the first reading picked lane %d", l.Index)
	}
	if l := y.busiestLane(st(1010, 500)); l == nil || l.Index != 1 {
		t.Fatalf("picked %+v, want lane 1 (490 sent since, against 10)", l)
	}
	if l := y.busiestLane(st(2010, 600)); l == nil || l.Index != 0 {
		t.Fatalf("picked %+v, want lane 0 again", l)
	}
	if l := y.busiestLane(st(2010, 600)); l != nil {
		t.Fatalf("picked lane %d though none sent anything since", l.Index)
	}
}

// A path state the sender's lane cannot give is named by why: the lane,
// or the receiver's lane of the same index to the sender, has not heard
// the other say it reads the delay echo; else it has no sample yet.
func TestUnknownPathNamed(t *testing.T) {
	reads := []string{"loss-runs", "padding", "delay-echo", "loss-split"}
	tx := &router.Status{PublicKey: "A", Peers: []router.PeerStatus{{PublicKey: "B",
		Lanes: []router.LaneStatus{{Index: 0, PeerReads: reads}, {Index: 1, PeerReads: []string{}}, {Index: 2}}}}}
	rx := &router.Status{PublicKey: "B", Peers: []router.PeerStatus{{PublicKey: "A",
		Lanes: []router.LaneStatus{{Index: 1, PeerReads: reads}, {Index: 0, PeerReads: reads[:2]}}}}}
	a0, a1, old := &tx.Peers[0].Lanes[0], &tx.Peers[0].Lanes[1], &tx.Peers[0].Lanes[2]
	for _, c := range []struct {
		tx, rx *router.LaneStatus
		want   string
	}{
		{a1, peerLane(rx, tx, 1), "unknown-tx-no-echo"},
		{a0, peerLane(rx, tx, 0), "unknown-rx-no-echo"},
		{a0, nil, "unknown"},
		{a0, peerLane(rx, tx, 1), "unknown"},
		{old, nil, "unknown"}, // a router too old to say what its peer reads
	} {
		if got := unknownPath(c.tx, c.rx); got != c.want {
			t.Errorf("lane %d (reads %v), receiver's %+v: %q, want %q", c.tx.Index, c.tx.PeerReads, c.rx, got, c.want)
		}
	}
	if peerLane(rx, tx, 2) != nil || peerLane(tx, tx, 0) != nil {
		t.Fatal("peerLane found a lane the receiver does not have, or one to another peer")
	}
}
