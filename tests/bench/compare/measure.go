package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
)

// testSpec is one measurement: an iperf3 run (client in A, server in B)
// or, with ping set, a ping from A to B. A flood row's (flood.go) has
// flood set: floodNone for the unflooded flow, else the flood's kind.
type testSpec struct {
	name  string
	args  []string // iperf3 client arguments besides -c, -J, -t, -O
	ping  bool
	flood string
}

// placement is where the processes run.
type placement struct {
	name    string
	daemons [2]string // taskset CPU list per side's daemon; "" = anywhere
	others  []string  // command prefix for iperf3 and ping
	// attacker is the CPUs of the flood rows' sending goroutine (the
	// others'); nil: anywhere.
	attacker []int
}

// placements are the placements run on a machine with cpus CPUs; only
// (the -placement flag: "unpinned", "pinned" or "" for both) keeps one.
func placements(cpus int, only string) []placement {
	var ps []placement
	if only != "pinned" {
		ps = append(ps, placement{name: placeUnpinned})
	}
	if cpus >= 2 && only != "unpinned" {
		// The receiving daemon alone on core 0; the sender and the
		// traffic tools on core 1.
		ps = append(ps, placement{name: placePinned,
			daemons:  [2]string{lab.A: "1", lab.B: "0"},
			others:   []string{"taskset", "-c", "1"},
			attacker: []int{1}})
	}
	return ps
}

func testSpecs(c *config) []testSpec {
	var ts []testSpec
	for _, p := range []int{1, 4} {
		for _, cc := range c.CCs {
			ts = append(ts, testSpec{name: fmt.Sprintf("tcp%d-%s", p, cc), args: []string{"-P", fmt.Sprint(p), "-C", cc}})
		}
	}
	dgram := fmt.Sprint(c.UDPLen)
	ts = append(ts,
		testSpec{name: "udp-blast", args: []string{"-u", "-b", "0", "-l", dgram}},
		testSpec{name: "udp-" + c.Rate, args: []string{"-u", "-b", c.Rate, "-l", dgram}},
		testSpec{name: "ping", ping: true})
	return append(ts, floodSpecs(c)...)
}

// inNS is argv run in namespace ns, behind the placement's prefix.
func inNS(ctx context.Context, p placement, ns string, argv ...string) *exec.Cmd {
	full := append(append(append([]string{}, p.others...), "ip", "netns", "exec", ns), argv...)
	return exec.CommandContext(ctx, full[0], full[1:]...)
}

// counters is a snapshot of the kernel counters a run is judged by.
type counters struct {
	tun     linkStats
	snmpA   map[string]uint64
	snmpB   map[string]uint64
	cpuRx   float64
	cpuTx   float64
	cpuWhen time.Time
	bridge  [2]impair.Stats
	bridged bool
	fec     fecStats
	hasFEC  bool
}

func snapshot(t topology, withCPU bool) (counters, error) {
	var c counters
	var err error
	if c.tun, err = tunStats(t.NS(lab.A), t.Tun(lab.A)); err != nil {
		return c, err
	}
	if c.snmpA, err = snmp(t.NS(lab.A)); err != nil {
		return c, err
	}
	if c.snmpB, err = snmp(t.NS(lab.B)); err != nil {
		return c, err
	}
	c.bridge, c.bridged = t.Bridge()
	c.fec, c.hasFEC = t.FEC()
	if withCPU {
		if err := c.sampleCPU(t); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *counters) sampleCPU(t topology) error {
	var err error
	c.cpuWhen = time.Now()
	c.fec, c.hasFEC = t.FEC()
	if c.cpuRx, err = cpuSeconds(t.Pid(lab.B)); err != nil {
		return fmt.Errorf("receiving daemon: %w", err)
	}
	if c.cpuTx, err = cpuSeconds(t.Pid(lab.A)); err != nil {
		return fmt.Errorf("sending daemon: %w", err)
	}
	return nil
}

// runTest measures spec once; failures are recorded in Record.Err. A
// flood row's flow under a flood needs rig, the topology's attacker.
func runTest(ctx context.Context, c *config, t topology, p placement, spec testSpec, rig *floodRig) Record {
	r, err := runTest1(ctx, c, t, p, spec, rig)
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// runTest1 takes the kernel counters around the measured run only: a
// flood row's CPU-matched baseline runs after the last snapshot.
func runTest1(ctx context.Context, c *config, t topology, p placement, spec testSpec, rig *floodRig) (Record, error) {
	r := Record{Flood: spec.flood}
	var pkts [][]byte
	if spec.attacked() {
		var err error
		if pkts, err = rig.packets(ctx, c, t, p, spec); err != nil {
			return r, fmt.Errorf("flood %s: %w", spec.flood, err)
		}
		r.FloodPackets = len(pkts)
	}
	if c.PingsFirst > 0 && !spec.ping {
		// Replies lost to a lossy path are no error.
		_ = inNS(ctx, p, t.NS(lab.A), "ping", "-n", "-q", "-c", fmt.Sprint(c.PingsFirst), "-i", "1", "-W", "1",
			t.Inner(lab.B).String()).Run()
	}
	before, err := snapshot(t, false)
	if err != nil {
		return r, err
	}
	switch {
	case spec.ping:
		err = runPing(ctx, c, t, p, &r)
	case spec.attacked():
		var fr floodRun
		fr, err = rig.during(ctx, lab.Port, pkts, 0, func() error { return runIperf(ctx, c, t, p, spec, &r) })
		r.FloodSent, r.FloodPPS = fr.sent, fr.pps
	default:
		err = runIperf(ctx, c, t, p, spec, &r)
	}
	if err != nil {
		return r, err
	}
	after, err := snapshot(t, false)
	if err != nil {
		return r, err
	}
	r.TunTxDropped = after.tun.Stats64.TX.Dropped - before.tun.Stats64.TX.Dropped
	r.TCPOutSegs = after.snmpA["Tcp.OutSegs"] - before.snmpA["Tcp.OutSegs"]
	r.TCPRetransSeg = after.snmpA["Tcp.RetransSegs"] - before.snmpA["Tcp.RetransSegs"]
	r.UDPRcvbufErrs = after.snmpB["Udp.RcvbufErrors"] - before.snmpB["Udp.RcvbufErrors"]
	r.TunTxQLen = after.tun.TxQLen
	if after.bridged {
		r.Bridge = bridgeDelta(before.bridge, after.bridge)
	}
	if before.hasFEC && after.hasFEC {
		r.FEC = fecDelta(before.fec, after.fec)
	}
	if spec.attacked() {
		// The flood's backlog (queued initiations, cookies under load)
		// drains before the baseline.
		if !sleepCtx(ctx, floodSettle) {
			return r, ctx.Err()
		}
		return r, matchedBaseline(ctx, c, t, p, spec, rig, pkts, &r)
	}
	return r, nil
}

func runPing(ctx context.Context, c *config, t topology, p placement, r *Record) error {
	out, err := inNS(ctx, p, t.NS(lab.A), "ping", "-n", "-c", fmt.Sprint(c.Pings), "-i", "0.01", "-W", "1",
		t.Inner(lab.B).String()).Output()
	pr := parsePing(string(out))
	if len(pr.RTTms) == 0 {
		return fmt.Errorf("ping: no replies (%v)", err)
	}
	r.RTTMedianMs = median(pr.RTTms)
	var sum float64
	for _, v := range pr.RTTms {
		sum += v
	}
	r.RTTAvgMs = sum / float64(len(pr.RTTms))
	if pr.Sent > 0 {
		r.PingLossPct = 100 * float64(pr.Sent-pr.Received) / float64(pr.Sent)
	}
	return nil
}

// runIperf runs one iperf3 test and samples both daemons' CPU time over
// a steady window inside its measured part (after the -O warm-up, a
// margin in from either end).
func runIperf(ctx context.Context, c *config, t topology, p placement, spec testSpec, r *Record) error {
	srvCtx, stopSrv := context.WithCancel(ctx)
	defer stopSrv()
	srv := inNS(srvCtx, p, t.NS(lab.B), "iperf3", "-s", "-1", "-B", t.Inner(lab.B).String())
	var srvOut lockedBuf // written by exec's copying goroutine
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { stopSrv(); _ = srv.Wait() }()
	if err := waitListen(ctx, t.NS(lab.B), 5201, 5*time.Second); err != nil {
		return fmt.Errorf("%w (iperf3 server: %.300s)", err, srvOut.String())
	}

	secs := int(c.Duration / time.Second)
	omit := int(c.Omit / time.Second)
	args := append([]string{"iperf3", "-c", t.Inner(lab.B).String(), "-J", "-t", fmt.Sprint(secs), "-O", fmt.Sprint(omit)}, spec.args...)
	if c.series != "" {
		args = append(args, "-i", seriesInterval)
	}
	cctx, cancel := context.WithTimeout(ctx, c.Duration+c.Omit+30*time.Second)
	defer cancel()
	cli := inNS(cctx, p, t.NS(lab.A), args...)
	var stderr strings.Builder
	cli.Stderr = &stderr

	const margin = 300 * time.Millisecond
	start := time.Now()
	type window struct {
		from, to counters
		paths    map[string]int
		bins     []queueBin
		err      error
	}
	win := make(chan window, 1)
	sctx, stopSampling := context.WithCancel(cctx)
	go func() {
		var w window
		if !sleepCtx(sctx, time.Until(start.Add(c.Omit+margin))) {
			w.err = fmt.Errorf("iperf3 ended before the steady window: %w", sctx.Err())
		} else if w.err = w.from.sampleCPU(t); w.err == nil {
			w.paths, w.bins = sampleSteady(sctx, t, start.Add(c.Omit+c.Duration-margin), c.WAN)
			w.err = w.to.sampleCPU(t)
		}
		win <- w
	}()
	out, err := cli.Output()
	stopSampling() // a client that ended early ends the window
	w := <-win
	res, perr := parseIperf(out)
	if perr != nil {
		return fmt.Errorf("%v (exit: %v; stderr: %.300s; server: %.300s)", perr, err, stderr.String(), srvOut.String())
	}
	if w.err != nil {
		return fmt.Errorf("CPU sampling: %w", w.err)
	}
	r.RecvGbps, r.SentGbps, r.Retransmits, r.LostPct, r.IperfLost, r.CC = res.RecvGbps, res.SentGbps, res.Retransmits, res.LostPct, res.IperfLost, res.CC
	r.TCPRTTms, r.intervals = res.RTTms, res.Intervals
	r.WindowSec = w.to.cpuWhen.Sub(w.from.cpuWhen).Seconds()
	r.RxCPUSec = w.to.cpuRx - w.from.cpuRx
	r.TxCPUSec = w.to.cpuTx - w.from.cpuTx
	if w.from.hasFEC && w.to.hasFEC {
		r.FECSteady = fecDelta(w.from.fec, w.to.fec)
	}
	r.PathStates = w.paths
	if w.bins != nil {
		r.QueueDrops, r.queueBins = summarizeQueue(w.bins, float64(c.WAN.queueTime())/1e6), w.bins
	}
	return nil
}

// pathEvery is how often samplePaths reads the sender's path state: a few
// times per loss report (about one a second), to see how often the FEC
// adapter judged the path queued while the flow ran.
const pathEvery = 250 * time.Millisecond

// samplePaths counts the sending side's path states (topology.PathState)
// every pathEvery until until or ctx ends; nil without any. latest holds
// the last state read, for sampleQueue's bins.
func samplePaths(ctx context.Context, t topology, until time.Time, latest *atomic.Pointer[pathSample]) map[string]int {
	var m map[string]int
	for time.Now().Before(until) {
		if s, ok := t.PathState(); ok {
			if m == nil {
				m = map[string]int{}
			}
			m[s.State]++
			latest.Store(&s)
		}
		if !sleepCtx(ctx, min(pathEvery, time.Until(until))) {
			break
		}
	}
	return m
}

// fecDelta is the FEC counters from one snapshot to a later one. A lane's
// lost-for-good count starts over with its keys (a rekey in between), so
// a difference is taken as at least 0.
func fecDelta(from, to fecStats) *fecStats {
	sub := func(a, b uint64) uint64 { return a - min(a, b) }
	return &fecStats{
		ParityOut: sub(to.ParityOut, from.ParityOut), UDPOut: sub(to.UDPOut, from.UDPOut),
		Recovered: sub(to.Recovered, from.Recovered), Unrecovered: sub(to.Unrecovered, from.Unrecovered),
		ParityBack: sub(to.ParityBack, from.ParityBack), UDPBack: sub(to.UDPBack, from.UDPBack),
	}
}

// sleepCtx sleeps d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// lockedBuf is a bytes.Buffer safe to read while a process writes to it.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitListen waits until a TCP socket listens on port in namespace ns.
func waitListen(ctx context.Context, ns string, port int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		out, _ := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "ss", "-Hltn", fmt.Sprintf("sport = :%d", port)).Output()
		if len(strings.TrimSpace(string(out))) > 0 {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("nothing listens on port %d in %s after %s", port, ns, timeout)
}
