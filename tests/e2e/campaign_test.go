// The flood-and-fault campaign: TestFloodCampaign, its configuration, and
// how one attack phase runs. What a phase is checked and reported against,
// and how B is measured, is in campaigncheck_test.go; the stream and the
// attacker in campaigntraffic_test.go.

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/lab"
)

// The flood-and-fault campaign. Router A (initiator) sends a
// paced, sequence-numbered UDP stream to router B (responder) while a third
// namespace, the attacker (internal/flood, which bench-compare's flood rows
// share), attached to B by its own veth on 172.31.251.0/24, attacks B's
// ListenPort with a raw socket (so it can write any source address) from
// one goroutine, as fast as that goroutine can send:
//
//	(a) random garbage of random sizes from random ports;
//	(b) initiations with a valid mac1 for B's public key from an unknown
//	    static key, each from one of 16384 random spoofed sources in
//	    10.64.0.0/10 (thousands of /24 prefixes, more than the limiters'
//	    8192-prefix tables hold); during (b) router A is restarted and its
//	    fresh handshake must complete (through the cookie path: B is under
//	    load);
//	(c) the captured tunnel datagrams and handshakes A sent B (the first
//	    handshake and traffic of the old session, and the new session's
//	    after the restart), replayed byte for byte from A's address and
//	    ports, over and over.
//
// Each phase runs the stream unflooded for a while, then under the attack,
// then (stream paused, attack still on) a TCP transfer, then the stream
// again after the attack has stopped. B's RSS (/proc/PID/status) and
// goroutines (go_goroutines from its metrics endpoint) are sampled before,
// during and after, and the counters of every phase are logged.
//
// The CI mode (default) floods 3 s per phase and asserts loose bounds that
// hold on a busy 2-core machine; YIP_CAMPAIGN=1 floods 60 s per phase,
// prints a table and asserts the targets docs/SECURITY.md states.
func TestFloodCampaign(t *testing.T) {
	cfg := campaignConfig{flood: 3 * time.Second, pre: time.Second, post: 2 * time.Second,
		baseline: 2 * time.Second, pps: 2000, size: 1000, tcpFor: 1500 * time.Millisecond, warm: time.Second}
	if os.Getenv("YIP_CAMPAIGN") == "1" {
		cfg.long = true
		cfg.flood, cfg.pre, cfg.baseline, cfg.tcpFor, cfg.warm = 60*time.Second, 2*time.Second, 10*time.Second, 10*time.Second, 10*time.Second
	}
	const metricsAddr = "127.0.0.1:9587"
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, Extra: [2]string{"", "MetricsListen = " + metricsAddr}})
	at := newAttacker(t, l)
	c := &campaign{t: t, l: l, cfg: cfg, at: at, metrics: metricsClient(l, metricsAddr)}
	// Steering by lane remote isolates floods (strangers' and known
	// sockets); as root with eBPF, which CI has, it must be on, or the
	// lane-socket check below would pass by being skipped.
	st, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	c.isolated = strings.HasPrefix(st.Steering, "by lane remote (eBPF)")
	if !c.isolated && os.Getenv("YIP_TEST_STEER_BY_PORT") == "" {
		t.Fatalf("B steers %q: flood isolation is off, so the campaign cannot check it", st.Steering)
	}

	// Capture what A sends B from the start (the first handshake and the
	// old session's data) for (c).
	cap1 := startCapture(t, l, 600, 20*time.Second)
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	c.stream = startStream(t, l, cfg.pps, cfg.size)
	defer c.stream.close()
	time.Sleep(500 * time.Millisecond)
	c.rss0, c.gor0 = c.rss(), c.goroutines()
	c.memory("baseline")

	// Unflooded baseline: the stream, then a TCP transfer.
	bStart := time.Now()
	time.Sleep(cfg.baseline)
	base := c.stream.window(bStart, time.Now())
	c.stream.paused.Store(true)
	tcp0 := c.tcp()
	c.stream.paused.Store(false)
	t.Logf("baseline: stream %d/%d delivered (%.1f%%), TCP %.3f Gbit/s; B RSS %.1f MiB, %d goroutines",
		base.got, base.sent, 100*base.ratio(), tcp0, mib(c.rss0), c.gor0)
	if base.ratio() < 0.95 {
		t.Fatalf("unflooded stream delivered only %.1f%%", 100*base.ratio())
	}

	var results []phaseResult
	results = append(results, c.phase("a: garbage", sending(at, flood.Garbage(at.Self(), at.Target())), nil))

	inits, err := flood.YipInitiations(l.PublicKey(lab.B), flood.SpoofedSources)
	if err != nil {
		t.Fatal(err)
	}
	var cap2 *flood.Capture
	results = append(results, c.phase("b: spoofed initiations + A restart", sending(at, flood.Spoofed(inits, at.Target())), func(pr *phaseResult) (time.Time, time.Time) {
		return c.restartA(pr, func() {
			cap2 = startCapture(t, l, 600, 20*time.Second) // the new handshake and session
		})
	}))

	captured := append(cap1.Wait(), cap2.Wait()...)
	results = append(results, c.phase("c: replayed capture", sending(at, flood.Replay(captured)), nil))
	if os.Getenv("YIP_CAMPAIGN_KNOWN") == "1" {
		// (d) Junk spoofed from A's own address (known to B: its
		// endpoint) from random ports lands on B's known sockets, where
		// A's next handshake queues too. Not in the default campaign:
		// it fails today (docs/SECURITY.md, "Junk from a peer's own
		// address"); it is the test of a fix.
		results = append(results, c.phase("d: junk from A's address + A restart", sending(at, flood.Garbage(l.Underlay[lab.A], at.Target())), func(pr *phaseResult) (time.Time, time.Time) {
			return c.restartA(pr, func() {})
		}))
	}

	time.Sleep(time.Second)
	rssEnd, gorEnd := c.rss(), c.goroutines()
	if rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 5, 20*time.Millisecond); err != nil || len(rtts) != 5 {
		t.Errorf("tunnel after the campaign: %d/5 ping replies, %v", len(rtts), err)
	}
	c.stream.close()
	dups, stale := c.stream.dups.Load(), c.stream.stale.Load()
	c.report(base, tcp0, results, rssEnd, gorEnd, len(captured))

	// Nothing from any attack was delivered: no replayed stream datagram
	// reached the application (a duplicate, or one older than 4 s), and
	// B wrote to its TUN no more inner packets than A read from its own.
	if dups != 0 || stale != 0 {
		t.Errorf("the stream received %d duplicates and %d stale (replayed) datagrams", dups, stale)
	}
	for _, r := range results {
		// Each shard publishes its counters at least every 50 ms
		// (more often under load): allow for what the stream sends in
		// 200 ms at each edge.
		if r.bOut > r.aTunIn+uint64(c.cfg.pps/5) {
			t.Errorf("%s: B delivered %d inner packets, A sent only %d", r.name, r.bOut, r.aTunIn)
		}
	}
	// B preallocates its buffers (about 54 MiB of heap, mostly untouched
	// when idle; the legitimate traffic touches part of them) and the
	// handshake flood's refusals allocate; the router runs with GOGC=25,
	// so that garbage stays near a quarter of the heap. Over the whole
	// campaign, from idle, the bound is 48 MiB; the 16 MiB target is per
	// flood (checked per phase in long mode).
	limit := uint64(48 << 20)
	if g := rssEnd - c.rss0; rssEnd > c.rss0 && g > limit {
		t.Errorf("B's RSS grew %.1f MiB over the campaign (limit %.0f)", mib(g), mib(limit))
	}
	if gorEnd > c.gor0+4 {
		t.Errorf("B's goroutines grew from %d to %d", c.gor0, gorEnd)
	}
}

type campaignConfig struct {
	long                       bool
	flood, pre, post, baseline time.Duration
	pps, size                  int
	tcpFor                     time.Duration
	warm                       time.Duration // RSS growth is measured from this far into each attack
}

type campaign struct {
	t       *testing.T
	l       *lab.Lab
	cfg     campaignConfig
	at      *flood.Attacker
	stream  *stream
	metrics func() (map[string]float64, error)
	rss0    uint64
	gor0    int
	// isolated: B steers by lane remote, with strangers' sockets.
	isolated bool
}

// phaseResult is what one attack phase measured.
type phaseResult struct {
	name                         string
	attackSent                   uint64
	attackRate                   float64 // datagrams/s the attacker got out
	pre, flood, after1, after    window
	recovery                     time.Duration // after the attack stopped, until every 100 ms of the stream delivered ≥ 90%
	tcp                          float64       // Gbit/s under the attack
	hs                           time.Duration // (b): A's fresh handshake
	hsInitiations                uint64        // initiations A sent for it
	rssBefore, rssPeak, rssAfter uint64
	rssWarm                      uint64 // cfg.warm into the attack
	gorBefore, gorAfter          int
	delta                        map[string]uint64 // B's counters over the phase
	bOut, aTunIn                 uint64
	aCompleted                   uint64 // handshakes A completed (its restart and rekeys)
	aBefore                      map[string]uint64
	// tcpMatched is the CPU-matched baseline: one TCP connection while
	// the same attack goes to flood.ClosedPort (matchedTCP).
	tcpMatched float64
	// floodSocketDrops are B's lane and listen sockets' kernel drops from
	// the phase's start to the end of the flood window (before the TCP
	// transfer): what the attack cost them.
	floodSocketDrops uint64
}

// phase runs one attack: the stream unflooded for cfg.pre, then attack in
// a goroutine for cfg.flood (during, when set, runs once the attack is on
// and returns a span of the stream to leave out of the flood figure), then
// a TCP transfer still under the attack, then the stream for cfg.post
// after the attack stopped.
func (c *campaign) phase(name string, attack func(stop *atomic.Bool) uint64,
	during func(*phaseResult) (time.Time, time.Time)) phaseResult {
	t, cfg := c.t, c.cfg
	tcpMatched := c.matchedTCP(attack)
	pr := phaseResult{name: name, rssBefore: c.rss(), gorBefore: c.goroutines(), tcpMatched: tcpMatched}
	// A's counters before B's, and B's after A's at the end: what is in
	// flight at either edge is counted by A and not by B. At the start
	// nothing may be in flight: the previous phase (or the baseline) may
	// have just ended a TCP transfer whose last megabytes still sit in
	// B's socket buffer, so the stream pauses until they drained.
	c.stream.paused.Store(true)
	time.Sleep(300 * time.Millisecond)
	pr.aBefore = c.counters(lab.A)
	before := c.counters(lab.B)
	c.stream.paused.Store(false)
	preStart := time.Now()
	time.Sleep(cfg.pre)
	var stop atomic.Bool
	sent := make(chan uint64, 1)
	floodStart := time.Now()
	go func() { sent <- attack(&stop) }()
	// Sample B's RSS while the attack runs.
	var peak, warm atomic.Uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for !stop.Load() {
			r := c.rss()
			peak.Store(max(peak.Load(), r))
			if warm.Load() == 0 && time.Since(floodStart) >= cfg.warm {
				warm.Store(r)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	var exFrom, exTo time.Time
	if during != nil {
		exFrom, exTo = during(&pr)
	}
	floodEnd := floodStart.Add(cfg.flood)
	if e := exTo.Add(time.Second); e.After(floodEnd) {
		floodEnd = e
	}
	time.Sleep(time.Until(floodEnd))
	pr.floodSocketDrops = c.counters(lab.B)["kernel_socket_drops"] - before["kernel_socket_drops"]
	c.stream.paused.Store(true)
	pr.tcp = c.tcp()
	stop.Store(true)
	attackEnd := time.Now()
	c.stream.paused.Store(false)
	pr.attackSent = <-sent
	<-sampled
	pr.attackRate = float64(pr.attackSent) / attackEnd.Sub(floodStart).Seconds()
	time.Sleep(cfg.post)
	time.Sleep(300 * time.Millisecond) // the last datagrams arrive
	pr.rssPeak, pr.rssWarm, pr.rssAfter, pr.gorAfter = max(peak.Load(), c.rss()), warm.Load(), c.rss(), c.goroutines()
	c.memory(name)

	pr.pre = c.stream.window(preStart, floodStart)
	ramp := floodStart.Add(100 * time.Millisecond) // the attack reaches B
	if exFrom.IsZero() {
		pr.flood = c.stream.window(ramp, floodEnd)
	} else {
		a, b := c.stream.window(ramp, exFrom), c.stream.window(exTo, floodEnd)
		pr.flood = window{sent: a.sent + b.sent, got: a.got + b.got}
	}
	pr.after1 = c.stream.window(attackEnd, attackEnd.Add(time.Second))
	pr.after = c.stream.window(attackEnd.Add(time.Second), attackEnd.Add(cfg.post))
	pr.recovery = c.stream.recovery(attackEnd, attackEnd.Add(cfg.post), 100*time.Millisecond, 0.9)

	after := c.counters(lab.B)
	pr.delta = map[string]uint64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 && v >= before[k] {
			pr.delta[k] = d
		}
	}
	pr.bOut = pr.delta["tun_out"]
	a := c.counters(lab.A)
	pr.aTunIn += a["tun_in"] - pr.aBefore["tun_in"]
	pr.aCompleted += a["hs_completed"] - pr.aBefore["hs_completed"]

	t.Logf("%s: attacker sent %d datagrams (%.0f/s); stream delivered %.1f%% before, %.1f%% under the attack, "+
		"%.1f%% in the first second after it and %.1f%% then (recovered after %s); TCP %.3f Gbit/s under the attack, "+
		"%.3f Gbit/s under the same flood to a closed port; B RSS %.1f -> %.1f (peak %.1f) MiB, goroutines %d -> %d",
		name, pr.attackSent, pr.attackRate, 100*pr.pre.ratio(), 100*pr.flood.ratio(), 100*pr.after1.ratio(),
		100*pr.after.ratio(), pr.recovery, pr.tcp, pr.tcpMatched, mib(pr.rssBefore), mib(pr.rssAfter), mib(pr.rssPeak), pr.gorBefore, pr.gorAfter)
	if pr.hs != 0 {
		t.Logf("%s: A's fresh handshake completed %s after it restarted (%d initiations)", name, pr.hs.Round(time.Millisecond), pr.hsInitiations)
	}
	keys := make([]string, 0, len(pr.delta))
	for k := range pr.delta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, pr.delta[k])
	}
	t.Logf("%s: B's counters:%s", name, b.String())

	c.check(&pr)
	return pr
}

// matchedTCP is the CPU-matched baseline of a phase's TCP transfer: the
// same attack, from the same generator at the same rate, sent to a UDP
// port of B's that nobody listens on (so the attacker's CPU and B's
// kernel receive path cost what they cost under the attack, and only the
// router's share differs), while one TCP connection runs through the
// tunnel, the stream paused as under the attack.
func (c *campaign) matchedTCP(attack func(stop *atomic.Bool) uint64) float64 {
	c.at.SetPort(flood.ClosedPort)
	defer c.at.SetPort(lab.Port)
	var stop atomic.Bool
	done := make(chan uint64, 1)
	go func() { done <- attack(&stop) }()
	time.Sleep(c.cfg.pre)
	c.stream.paused.Store(true)
	tcp := c.tcp()
	stop.Store(true)
	<-done
	c.stream.paused.Store(false)
	return tcp
}

// restartA stops router A one second into an attack and starts it again
// (a new process, new ephemeral keys, no session; started runs between
// the two), and measures how long its handshake takes to complete under
// the attack. It returns the span of the stream to leave out.
func (c *campaign) restartA(pr *phaseResult, started func()) (time.Time, time.Time) {
	t, l := c.t, c.l
	time.Sleep(time.Second)
	from := time.Now()
	// Its counters start again from zero, so the phase's sum of A's
	// tun_in adds what the old process counted.
	a := c.counters(lab.A)
	pr.aTunIn += a["tun_in"] - pr.aBefore["tun_in"]
	pr.aCompleted += a["hs_completed"] - pr.aBefore["hs_completed"]
	pr.aBefore = map[string]uint64{}
	if err := l.Stop(lab.A); err != nil {
		t.Errorf("stopping A: %v", err)
	}
	started()
	if err := l.Start(lab.A); err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	// The stream's next datagrams make A initiate; poll for the
	// completed handshake.
	for {
		if st, err := l.Status(lab.A); err == nil && st.Handshakes.Completed >= 1 {
			pr.hs = time.Since(begun)
			pr.hsInitiations = st.Handshakes.Initiated
			break
		}
		if time.Since(begun) > 10*time.Second {
			t.Errorf("%s: A's handshake did not complete in 10 s", pr.name)
			pr.hs = -1
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return from, time.Now()
}
