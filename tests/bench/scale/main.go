// Command scale is `make bench-scale`: one yip-router "hub" against N
// simulated peers (default 10,000). The hub runs the real binary in one
// network namespace; this process enters another (the generator), gives
// every simulated peer its own IPv4 address (one per /24) and UDP socket,
// and drives the handshakes and pings with the project's crypto package.
// It measures start time and memory per configured and per active peer,
// a handshake burst (cookie path included), a paced handshake run,
// pings through every session, `show --json` and a metrics scrape, and a
// SIGHUP reload; the results go under docs/bench/ as scale-STAMP.md and
// .json. With -wg it then runs the same burst against wireguard-go as the
// hub (wghub.go), the anchor of the burst's handshakes per hub
// CPU-second. Root only; see docs/BENCHMARKS.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	yipconfig "github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/netns"
)

type config struct {
	Peers        int           `json:"peers"`
	Shards       int           `json:"shards"`
	HubCPUs      string        `json:"hub_cpus"`
	GenCPUs      string        `json:"gen_cpus"`
	Spread       bool          `json:"spread"`
	BurstTimeout time.Duration `json:"burst_timeout_ns"`
	PacedRate    int           `json:"paced_rate"`
	PingTimeout  time.Duration `json:"ping_timeout_ns"`
	Sample       int           `json:"reload_sample"`
	WG           string        `json:"wireguard_go,omitempty"` // the binary of the anchor burst
	bin          string
	out          string
	commit       string
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == ceilingFlag {
		os.Exit(ceilingChild())
	}
	c := &config{}
	var burstS, pingS int
	flag.IntVar(&c.Peers, "peers", 10000, "simulated peers (at most 16384: one /24 of 100.64.0.0/10 each)")
	flag.IntVar(&c.Shards, "shards", 2, "hub shards (yip-router up --shards)")
	flag.StringVar(&c.HubCPUs, "hub-cpus", "auto", "taskset CPU list for the hub; auto: CPU 0 when -shards 1 on 2+ CPUs, else unpinned; '' unpinned")
	flag.StringVar(&c.GenCPUs, "gen-cpus", "auto", "CPU list for this generator; auto: CPU 1 when the hub is pinned to 0, else unpinned")
	flag.BoolVar(&c.Spread, "spread", false, "give peer i a source port with low bits i mod shards, so a hub steering by port (its fallback without eBPF) spreads the handshakes over its shards; a hub steering by lane remote spreads them by hash either way")
	flag.IntVar(&burstS, "burst-timeout", 60, "seconds the burst may take")
	flag.IntVar(&c.PacedRate, "paced-rate", 400, "initiations per second of the paced run (0: skip it)")
	flag.IntVar(&pingS, "ping-timeout", 5, "seconds to wait for each echo reply")
	flag.IntVar(&c.Sample, "sample", 100, "peers re-pinged after the reload")
	flag.StringVar(&c.bin, "yip", "bin/yip-router", "yip-router binary")
	flag.StringVar(&c.WG, "wg", "", "wireguard-go binary: after yip-router's phases, run the same burst against it as the hub (empty: skip)")
	flag.StringVar(&c.out, "out", "docs/bench", "directory for the results")
	flag.StringVar(&c.commit, "commit", "", "yip-router version to record (default: git describe)")
	flag.Parse()
	c.BurstTimeout, c.PingTimeout = time.Duration(burstS)*time.Second, time.Duration(pingS)*time.Second
	if err := check(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(2)
	}
	for _, b := range []*string{&c.bin, &c.WG} {
		if abs, err := filepath.Abs(*b); err == nil && *b != "" {
			*b = abs
		}
	}
	resolveCPUs(c)
	if err := pinSelf(c.GenCPUs); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale: pinning the generator:", err)
		os.Exit(1)
	}
	m := newMeta(c)
	res, err := run(c)
	if c.WG != "" {
		// After yip-router's hub stopped: nothing else of this run on
		// the hub's CPUs.
		wr, werr := wgBurst(c)
		res.WGBurst = wr
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("wireguard-go burst: %w", werr))
		}
		if wr != nil && wr.PerHubCPUSec > 0 && res.Burst.PerHubCPUSec > 0 {
			res.BurstVsWG = res.Burst.PerHubCPUSec / wr.PerHubCPUSec
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		res.Error = err.Error()
	}
	if werr := report(c, m, res); werr != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", werr)
		os.Exit(1)
	}
	if err != nil {
		os.Exit(1)
	}
}

func check(c *config) error {
	if err := netns.Available(); err != nil {
		return err
	}
	if _, err := os.Stat(c.bin); err != nil {
		return fmt.Errorf("%v (make bench-scale builds it)", err)
	}
	if c.WG != "" {
		if _, err := os.Stat(c.WG); err != nil {
			return fmt.Errorf("-wg: %v (make bench-scale builds it)", err)
		}
	}
	switch {
	case c.Peers < 2 || c.Peers > maxPeers:
		return fmt.Errorf("peers %d: want 2..%d", c.Peers, maxPeers)
	case c.Shards < 1 || c.Shards > yipconfig.MaxShards:
		return fmt.Errorf("shards %d: want 1..%d", c.Shards, yipconfig.MaxShards)
	case c.Sample < 1:
		return fmt.Errorf("sample %d: want at least 1", c.Sample)
	}
	return nil
}

// resolveCPUs fills in the auto placements: with one hub shard on a
// machine of 2+ CPUs the hub gets CPU 0 and the generator CPU 1 (a clean
// per-core figure); otherwise both float.
func resolveCPUs(c *config) {
	pin := c.Shards == 1 && runtime.NumCPU() >= 2
	if c.HubCPUs == "auto" {
		c.HubCPUs = ""
		if pin {
			c.HubCPUs = "0"
		}
	}
	if c.GenCPUs == "auto" {
		c.GenCPUs = ""
		if c.HubCPUs == "0" && runtime.NumCPU() >= 2 {
			c.GenCPUs = "1"
		}
	}
}

// pinSelf sets the affinity of every thread of this process to cpus (a
// taskset-style list) and GOMAXPROCS to their number; new threads inherit it.
func pinSelf(cpus string) error {
	if cpus == "" {
		return nil
	}
	set, err := parseCPUList(cpus)
	if err != nil {
		return err
	}
	var cs unix.CPUSet
	for _, c := range set {
		cs.Set(c)
	}
	runtime.GOMAXPROCS(len(set))
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, _ := strconv.Atoi(t.Name())
		if err := unix.SchedSetaffinity(tid, &cs); err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}

// parseCPUList reads "0", "1,3" or "0-2,5".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad %q", s, part)
			}
		}
		for i := a; i <= b; i++ {
			if !slices.Contains(out, i) {
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// raiseNofile lets this process hold n more descriptors.
func raiseNofile(n uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return err
	}
	if rl.Cur >= n {
		return nil
	}
	rl.Cur = n
	rl.Max = max(rl.Max, n)
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// writeConf writes a hub configuration (mode 0600).
func writeConf(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// run does every phase in order; the result holds what was measured even
// when a later phase fails.
func run(c *config) (*Result, error) {
	res := &Result{}
	if err := raiseNofile(uint64(c.Peers) + 4096); err != nil {
		return res, fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	hubPriv, err := crypto.GeneratePrivateKey()
	if err != nil {
		return res, err
	}
	logf("generating %d peer keys", c.Peers)
	t0 := time.Now()
	peers, err := newPeers(c.Peers, hubPriv.Public(), c.Shards, c.Spread)
	if err != nil {
		return res, err
	}
	pubs := make([]crypto.PublicKey, len(peers))
	for i, p := range peers {
		pubs[i] = p.yip.pub
	}
	logf("keys ready in %s", time.Since(t0).Round(time.Millisecond))
	t, err := newTopo()
	if err != nil {
		return res, err
	}
	defer t.Close()
	metrics := fmt.Sprintf("127.0.0.1:%d", metricsPort)

	// 1. Start time and idle RSS with 0, 1 and N configured peers.
	for _, n := range []int{0, 1, c.Peers} {
		conf := filepath.Join(t.dir, fmt.Sprintf("hub-%d.conf", n))
		if err := writeConf(conf, hubConfig(t.ifname, hubPriv, hubPort, metrics, pubs[:n], nil)); err != nil {
			return res, err
		}
		h, err := t.startHub(c.bin, conf, c.Shards, c.HubCPUs, fmt.Sprintf("hub-%d", n))
		if err != nil {
			return res, err
		}
		time.Sleep(2 * time.Second) // let start-up garbage and the first ticks settle
		rss, _ := rssKiB(h.pid())
		cpu, _ := cpuSec(h.pid())
		sr := StartRun{Peers: n, ReadyMs: ms(h.Ready), RSSKiB: rss, CPUSec: cpu,
			Command: h.command() + "; until: ip netns exec " + t.hubNS + " " + c.bin + " show -i " + t.ifname + " --dump"}
		res.Start = append(res.Start, sr)
		logf("hub with %d peers: ready in %.0f ms, RSS %d KiB, CPU %.2f s", n, sr.ReadyMs, rss, cpu)
		if n != c.Peers {
			h.stop()
			continue
		}
		err = runLoaded(c, t, h, peers, pubs, hubPriv, res)
		h.stop()
		res.HubLogTail = tail(h.log(), 40)
		return res, err
	}
	return res, nil
}

// runLoaded runs phases 2-5 against the hub with N configured peers.
func runLoaded(c *config, t *topo, h *hub, peers []*simPeer, pubs []crypto.PublicKey, hubPriv crypto.PrivateKey, res *Result) error {
	if len(res.Start) >= 2 {
		r1, rn := res.Start[len(res.Start)-2], res.Start[len(res.Start)-1]
		res.RSSPerIdlePeerKiB = float64(rn.RSSKiB-r1.RSSKiB) / float64(c.Peers-1)
	}
	res.RSSIdleKiB, _ = rssKiB(h.pid())
	res.IdleCoresNoSessions = idleCores(h, 3*time.Second)
	res.Queries = append(res.Queries, query(t, c.bin, "idle, no sessions"))

	if err := netns.Do(t.genNS, func() error { return openSockets(peers) }); err != nil {
		return fmt.Errorf("generator sockets: %w", err)
	}
	defer closeSockets(peers)

	// 2. Burst: all initiations prebuilt, then sent at once.
	logf("prebuilding %d initiations", len(peers))
	t0 := time.Now()
	for _, p := range peers {
		if err := p.prebuild(); err != nil {
			return err
		}
	}
	logf("prebuilt in %s", time.Since(t0).Round(time.Millisecond))
	ceil, err := cryptoCeiling(hubPriv, peers, ceilingHandshakes, ceilingPasses, c.HubCPUs)
	if err != nil {
		return fmt.Errorf("crypto ceiling: %w", err)
	}
	res.Ceiling = &ceil
	logf("crypto ceiling: %.0f handshakes per CPU-second (%d answered per pass, passes %.0f); burst", ceil.PerCPUSec, ceil.Handshakes, ceil.Passes)
	res.Burst = handshakes(c, t, h, peers, "burst (all at once)", 0)
	logf("%s", res.Burst.summary())
	res.Burst.SettleS, res.Burst.SettleCPUSec = settle(t, h)
	logf("hub busy for %.1f s more (%.2f CPU-s) after the burst ended", res.Burst.SettleS, res.Burst.SettleCPUSec)
	if later, err := cryptoCeiling(hubPriv, peers, ceilingHandshakes, ceilingPasses, c.HubCPUs); err == nil {
		res.Ceiling.add(later)
		logf("crypto ceiling after the burst: passes %.0f; ceiling of the run %.0f", later.Passes, res.Ceiling.PerCPUSec)
	} else {
		return fmt.Errorf("crypto ceiling after the burst: %w", err)
	}

	// 3. One ping per peer through its session.
	res.Traffic = append(res.Traffic, pingAll(c, t, h, peers, "after burst"))
	logf("%s", res.Traffic[len(res.Traffic)-1].summary())
	res.RSSAfterTrafficKiB, _ = rssKiB(h.pid())
	res.RSSPerActiveLaneKiB = float64(res.RSSAfterTrafficKiB-res.RSSIdleKiB) / float64(c.Peers)
	res.IdleCoresSessions = idleCores(h, 3*time.Second)
	logf("hub idle with sessions: %.2f cores", res.IdleCoresSessions)
	time.Sleep(time.Second)
	res.Queries = append(res.Queries, query(t, c.bin, "idle, N sessions"))

	// 2b. Paced: every peer handshakes again at PacedRate/s, with show
	// and a scrape half-way.
	if c.PacedRate > 0 {
		var q Query
		var wg sync.WaitGroup
		half := time.Duration(float64(len(peers)) / float64(c.PacedRate) / 2 * float64(time.Second))
		wg.Go(func() {
			time.Sleep(half)
			q = query(t, c.bin, fmt.Sprintf("during the paced handshakes (%d/s)", c.PacedRate))
		})
		r := handshakes(c, t, h, peers, fmt.Sprintf("paced %d/s (re-handshake of live sessions)", c.PacedRate), c.PacedRate)
		wg.Wait()
		r.SettleS, r.SettleCPUSec = settle(t, h)
		logf("hub busy for %.1f s more (%.2f CPU-s) after the paced run ended", r.SettleS, r.SettleCPUSec)
		res.Paced = &r
		res.Queries = append(res.Queries, q)
		logf("%s", r.summary())
		res.Traffic = append(res.Traffic, pingAll(c, t, h, peers, "after paced re-handshake"))
		logf("%s", res.Traffic[len(res.Traffic)-1].summary())
	}

	// 5. Reload with peer 0's AllowedIPs changed.
	rl, err := reload(c, t, h, peers, pubs, hubPriv)
	res.Reload = rl
	if err != nil {
		return err
	}
	logf("reload: %.0f ms, sample %d/%d answered, handshakes changed for %d peers (peer 0: %v)",
		rl.WallMs, rl.SampleAnswered, rl.Sample, rl.HandshakeChanged, rl.Peer0Changed)
	res.RSSEndKiB, _ = rssKiB(h.pid())
	return nil
}
