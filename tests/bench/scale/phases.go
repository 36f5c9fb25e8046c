// The phases run calls once the hub is up: the handshake burst and the
// paced run, pings through every session, show --json and the metrics
// scrape, the SIGHUP reload and its log line, and waiting for the hub's
// queues to drain between them.

package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/router"
)

// settle waits until the hub's UDP receive queues on its listen port are
// empty (twice in a row, 500 ms apart), at most two minutes, and returns
// how long that took and the hub CPU spent meanwhile: the backlog of
// queued initiations a phase left behind. (Hub CPU cannot tell: with
// thousands of sessions an idle hub keeps a core partly busy.)
func settle(t *topo, h hubProc) (float64, float64) {
	start := time.Now()
	c0, _ := cpuSec(h.pid())
	empty := 0
	for time.Since(start) < 2*time.Minute && empty < 2 {
		time.Sleep(500 * time.Millisecond)
		if q, err := t.rxQueue(hubPort); err == nil && q == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	c, _ := cpuSec(h.pid())
	return time.Since(start).Seconds(), c - c0
}

// idleCores is the hub's CPU use over d, in cores.
func idleCores(h *hub, d time.Duration) float64 {
	c0, _ := cpuSec(h.pid())
	time.Sleep(d)
	c1, _ := cpuSec(h.pid())
	return (c1 - c0) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// status runs show --json and parses it.
func status(t *topo, bin string) (*router.Status, error) {
	out, _, _, err := t.showJSON(bin)
	if err != nil {
		return nil, err
	}
	var st []*router.Status
	if err := json.Unmarshal(out, &st); err != nil {
		var one router.Status
		if err2 := json.Unmarshal(out, &one); err2 != nil {
			return nil, err
		}
		return &one, nil
	}
	if len(st) != 1 {
		return nil, fmt.Errorf("show --json: %d routers", len(st))
	}
	return st[0], nil
}

func query(t *topo, bin, when string) Query {
	q := Query{When: when}
	out, took, cmd, err := t.showJSON(bin)
	q.ShowMs, q.ShowBytes, q.ShowCommand = ms(took), len(out), cmd
	if err != nil {
		q.Err = err.Error()
	}
	n, took, err := t.scrape()
	q.ScrapeMs, q.ScrapeBytes = ms(took), n
	q.ScrapeCommand = fmt.Sprintf("GET http://127.0.0.1:%d/metrics in netns %s (net/http)", metricsPort, t.hubNS)
	if err != nil {
		q.Err += " scrape: " + err.Error()
	}
	logf("show --json (%s): %.0f ms, %d bytes; scrape %.0f ms, %d bytes %s", when, q.ShowMs, q.ShowBytes, q.ScrapeMs, q.ScrapeBytes, q.Err)
	return q
}

// hubProc is the hub process a phase measures: yip-router (hub) or
// wireguard-go (wgHub).
type hubProc interface {
	pid() int
	command() string
	// handshakeCounts are the hub's own handshake counters; false if it
	// has none to tell (wireguard-go).
	handshakeCounts() (router.HandshakeCounts, bool)
}

// handshakes runs one handshake phase over all peers: all at once from
// prebuilt initiations (rate 0) or started at rate per second.
func handshakes(c *config, t *topo, h hubProc, peers []*simPeer, name string, rate int) HSResult {
	r := HSResult{Name: name, Peers: len(peers), Rate: rate}
	before, counted := h.handshakeCounts()
	udpBefore := t.snmpUDP(t.hubNS)
	var st hsStats
	hubCPU0, _ := cpuSec(h.pid())
	genCPU0 := selfCPU()
	start := time.Now()
	deadline := start.Add(c.BurstTimeout)
	if rate > 0 {
		deadline = start.Add(time.Duration(float64(len(peers))/float64(rate)*float64(time.Second)) + c.BurstTimeout)
	}
	done := make([]time.Duration, len(peers))
	var wg sync.WaitGroup
	if rate == 0 {
		gate := make(chan struct{})
		for i, p := range peers {
			wg.Go(func() {
				<-gate
				p.handshake(t.hubAddr(), true, deadline, &st)
				if p.hsTook > 0 {
					done[i] = time.Since(start)
				}
			})
		}
		start = time.Now()
		close(gate)
	} else {
		interval := time.Second / time.Duration(rate)
		for i, p := range peers {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			p.hsTook = 0
			wg.Go(func() {
				p.handshake(t.hubAddr(), false, deadline, &st)
				if p.hsTook > 0 {
					done[i] = time.Since(start)
				}
			})
		}
	}
	wg.Wait()
	wall := time.Since(start)
	hubCPU1, _ := cpuSec(h.pid())
	genCPU1 := selfCPU()
	r.Completed = int(st.done.Load())
	if rate == 0 {
		for i, p := range peers {
			if p.resp != nil && !p.finishResponse() {
				r.Completed--
				r.ResponsesRefused++
				done[i] = 0
			}
		}
	}
	var last time.Duration
	var lat []time.Duration
	for i, d := range done {
		if d > 0 {
			last = max(last, d)
			lat = append(lat, peers[i].hsTook)
		}
	}
	r.WallS = wall.Seconds()
	r.LastDoneS = last.Seconds()
	r.PerSec = div(float64(r.Completed), r.LastDoneS)
	r.HubCPUSec = hubCPU1 - hubCPU0
	r.PerHubCPUSec = div(float64(r.Completed), r.HubCPUSec)
	r.GenCPUSec = genCPU1 - genCPU0
	r.Sent, r.Cookies, r.Timeouts = st.sent.Load(), st.cookies.Load(), st.timeouts.Load()
	r.GaveUp, r.Other, r.SendErrs, r.ReadErrs = st.gaveUp.Load(), st.other.Load(), st.sendErrs.Load(), st.readErrs.Load()
	for i := range st.cookiePer {
		r.PeersByCookies = append(r.PeersByCookies, st.cookiePer[i].Load())
	}
	r.LatencyP50Ms, r.LatencyP99Ms, r.LatencyMaxMs = percentiles(lat)
	r.Timeline = timeline(done, time.Second)
	if after, ok := h.handshakeCounts(); counted && ok {
		d := diffHS(before, after)
		r.Hub = &d
	}
	r.HubUDP = diffMap(udpBefore, t.snmpUDP(t.hubNS))
	r.Command = h.command()
	return r
}

func pingAll(c *config, t *topo, h *hub, peers []*simPeer, when string) PingResult {
	r := PingResult{When: when, Peers: len(peers)}
	var st pingStats
	hubCPU0, _ := cpuSec(h.pid())
	genCPU0 := selfCPU()
	rtts := make([]time.Duration, len(peers))
	start := time.Now()
	var wg sync.WaitGroup
	for i, p := range peers {
		if p.yip == nil || p.yip.sess == nil {
			continue
		}
		r.WithSession++
		wg.Go(func() { rtts[i] = p.ping(t.hubAddr(), c.PingTimeout, &st) })
	}
	wg.Wait()
	r.WallS = time.Since(start).Seconds()
	r.HubCPUSec, _ = cpuSec(h.pid())
	r.HubCPUSec -= hubCPU0
	r.GenCPUSec = selfCPU() - genCPU0
	var ok []time.Duration
	for _, d := range rtts {
		if d > 0 {
			ok = append(ok, d)
		}
	}
	r.Answered = len(ok)
	r.RTTP50Ms, r.RTTP99Ms, r.RTTMaxMs = percentiles(ok)
	r.Control, r.Parity, r.OtherData = st.control.Load(), st.parity.Load(), st.otherData.Load()
	r.BadTag, r.OpenErrs = st.badTag.Load(), st.openErrs.Load()
	return r
}

// reload rewrites the N-peer config with peer 0's AllowedIPs moved,
// sends SIGHUP, times it until the log says so, then re-pings a sample of
// other peers through their existing sessions and compares per-peer
// handshake counters.
func reload(c *config, t *topo, h *hub, peers []*simPeer, pubs []crypto.PublicKey, hubPriv crypto.PrivateKey) (*ReloadResult, error) {
	r := &ReloadResult{Sample: min(c.Sample, len(peers)-1)}
	before, err := status(t, c.bin)
	if err != nil {
		return r, err
	}
	conf := h.conf
	b := hubConfig(t.ifname, hubPriv, hubPort, fmt.Sprintf("127.0.0.1:%d", metricsPort), pubs, map[int]netip.Prefix{0: reloadInner})
	if err := writeConf(conf, b); err != nil {
		return r, err
	}
	fi, err := os.Stat(h.logPath)
	if err != nil {
		return r, err
	}
	off := fi.Size()
	hubCPU0, _ := cpuSec(h.pid())
	start := time.Now()
	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return r, err
	}
	r.Command = fmt.Sprintf("kill -HUP %d; wait for \"configuration reloaded\" in the hub's log", h.pid())
	for {
		line, found := logLineAfter(h.logPath, off, "configuration reloaded", "reload failed")
		if found {
			r.WallMs = ms(time.Since(start))
			r.LogLine = line
			break
		}
		if time.Since(start) > 2*time.Minute {
			return r, fmt.Errorf("no reload message in the hub's log after 2 min")
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.HubCPUSec, _ = cpuSec(h.pid())
	r.HubCPUSec -= hubCPU0
	if strings.Contains(r.LogLine, "reload failed") {
		return r, fmt.Errorf("hub: %s", r.LogLine)
	}
	// Re-ping a sample spread over the peers (not peer 0) with the
	// sessions they have.
	var sample []*simPeer
	step := max(1, (len(peers)-1)/r.Sample)
	for i := 1; i < len(peers) && len(sample) < r.Sample; i += step {
		sample = append(sample, peers[i])
	}
	var st pingStats
	var wg sync.WaitGroup
	var answered sync.Map
	for _, p := range sample {
		wg.Go(func() {
			if p.ping(t.hubAddr(), c.PingTimeout, &st) > 0 {
				answered.Store(p.i, true)
			}
		})
	}
	wg.Wait()
	r.SampleAnswered = int(st.answered.Load())
	after, err := status(t, c.bin)
	if err != nil {
		return r, err
	}
	hs := func(s *router.Status) map[string]uint64 {
		m := make(map[string]uint64, len(s.Peers))
		for _, p := range s.Peers {
			m[p.PublicKey] = p.Handshakes
		}
		return m
	}
	hb, ha := hs(before), hs(after)
	for k, v := range ha {
		if hb[k] != v {
			r.HandshakeChanged++
			if k == pubs[0].String() {
				r.Peer0Changed = true
			}
		}
	}
	for _, p := range after.Peers {
		if p.PublicKey == pubs[0].String() {
			r.Peer0AllowedIPs = strings.Join(p.AllowedIPs, ",")
		}
	}
	r.HubTotalsDiff = diffHS(before.Handshakes, after.Handshakes)
	return r, nil
}

// logLineAfter returns the first line after byte off of path that holds
// any of subs.
func logLineAfter(path string, off int64, subs ...string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off {
		return "", false
	}
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return "", false
	}
	for _, ln := range strings.Split(string(b), "\n") {
		for _, s := range subs {
			if strings.Contains(ln, s) {
				return strings.TrimSpace(ln), true
			}
		}
	}
	return "", false
}

func tail(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
