package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/internal/netns"
	"github.com/yip-router/yip-router/router"
)

// topo is the two namespaces: "hub" runs yip-router, "gen" the simulated
// peers, joined by a veth; gen answers on all of 100.64.0.0/10 (AnyIP) and
// hub routes that range to gen.
type topo struct {
	hubNS, genNS string
	ifname       string // the hub's TUN
	hubUnder     netip.Addr
	genUnder     netip.Addr
	dir          string
}

const (
	hubPort     = 51820
	metricsPort = 9586
)

func newTopo() (*topo, error) {
	var idb [3]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	dir, err := os.MkdirTemp("", "yip-scale-")
	if err != nil {
		return nil, err
	}
	t := &topo{hubNS: "yipH-" + id, genNS: "yipG-" + id, ifname: "yscale" + id, dir: dir,
		hubUnder: netip.MustParseAddr("172.30.99.1"), genUnder: netip.MustParseAddr("172.30.99.2")}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	for _, ns := range []string{t.hubNS, t.genNS} {
		if err := netns.Add(ns); err != nil {
			return nil, err
		}
	}
	if err := netns.Veth(t.hubNS, "vh"+id, t.hubUnder.String()+"/24", t.genNS, "vg"+id, t.genUnder.String()+"/24"); err != nil {
		return nil, err
	}
	if err := netns.IP("-n", t.genNS, "route", "add", "local", underlayNet.String(), "dev", "lo"); err != nil {
		return nil, err
	}
	if err := netns.IP("-n", t.hubNS, "route", "add", underlayNet.String(), "via", t.genUnder.String()); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

func (t *topo) Close() {
	_ = netns.Del(t.hubNS)
	_ = netns.Del(t.genNS)
	os.RemoveAll(t.dir)
}

func (t *topo) hubAddr() netip.AddrPort { return netip.AddrPortFrom(t.hubUnder, hubPort) }

// exec runs argv in namespace ns, returning stdout and the wall time.
func (t *topo) exec(ns string, argv ...string) ([]byte, time.Duration, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return out.Bytes(), took, fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), took, nil
}

// hub is a running yip-router.
type hub struct {
	daemon
	t    *topo
	bin  string
	conf string
	// Ready: from process start until `show --dump` answered.
	Ready time.Duration
}

// startHub runs bin with conf in the hub namespace (under taskset -c cpus
// if set) and waits until `yip-router show -i IFACE --dump` answers.
func (t *topo) startHub(bin, conf string, shards int, cpus string, name string) (*hub, error) {
	h := &hub{t: t, bin: bin, conf: conf}
	argv := []string{"ip", "netns", "exec", t.hubNS, bin, "up", "-c", conf, "--shards", strconv.Itoa(shards)}
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	start := time.Now()
	if err := h.start(argv, filepath.Join(t.dir, name+".log")); err != nil {
		return nil, err
	}
	deadline := start.Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if _, _, err := t.exec(t.hubNS, bin, "show", "-i", t.ifname, "--dump"); err == nil {
			h.Ready = time.Since(start)
			return h, nil
		}
		select {
		case <-h.exited:
			h.logf.Close()
			return nil, fmt.Errorf("hub exited during start; log:\n%s", h.log())
		case <-time.After(20 * time.Millisecond):
		}
	}
	h.stop()
	return nil, fmt.Errorf("hub not answering show after 5 min; log:\n%s", h.log())
}

func (h *hub) command() string { return h.argvString() }

// handshakeCounts are show --json's handshake counters.
func (h *hub) handshakeCounts() (router.HandshakeCounts, bool) {
	st, err := status(h.t, h.bin)
	if err != nil {
		return router.HandshakeCounts{}, false
	}
	return st.Handshakes, true
}

// rssKiB is VmRSS of pid in KiB.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, errors.New("no VmRSS")
}

// clkTck is USER_HZ: /proc/PID/stat counts CPU time in these.
const clkTck = 100

// cpuSec is utime+stime of pid in seconds.
func cpuSec(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line; the command name (field 2) may hold spaces.
func parseStatCPU(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14 = f[11].
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(u+st) / clkTck, nil
}

// selfCPU is this process's user+system CPU seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// showJSON runs `yip-router show -i IFACE --json` in the hub namespace.
func (t *topo) showJSON(bin string) ([]byte, time.Duration, string, error) {
	argv := []string{bin, "show", "-i", t.ifname, "--json"}
	out, took, err := t.exec(t.hubNS, argv...)
	return out, took, "ip netns exec " + t.hubNS + " " + strings.Join(argv, " "), err
}

// scrape GETs the hub's /metrics from inside the hub namespace.
func (t *topo) scrape() (int, time.Duration, error) {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(t.hubNS, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	start := time.Now()
	resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		return 0, time.Since(start), err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("metrics: %s", resp.Status)
	}
	return int(n), took, err
}

// snmpUDP returns the Udp: counters of namespace ns (/proc/net/snmp).
func (t *topo) snmpUDP(ns string) map[string]int64 {
	out, _, err := t.exec(ns, "cat", "/proc/net/snmp")
	if err != nil {
		return nil
	}
	return parseSnmp(string(out), "Udp:")
}

// parseSnmp pairs the header and value lines of one protocol in
// /proc/net/snmp.
func parseSnmp(s, proto string) map[string]int64 {
	var lines [][]string
	for _, ln := range strings.Split(s, "\n") {
		if strings.HasPrefix(ln, proto) {
			lines = append(lines, strings.Fields(ln)[1:])
		}
	}
	if len(lines) < 2 || len(lines[0]) != len(lines[1]) {
		return nil
	}
	m := map[string]int64{}
	for i, k := range lines[0] {
		v, _ := strconv.ParseInt(lines[1][i], 10, 64)
		m[k] = v
	}
	return m
}

// rxQueue sums the receive queues of the hub namespace's UDP sockets on
// port (/proc/net/udp and udp6).
func (t *topo) rxQueue(port uint16) (int64, error) {
	var sum int64
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		out, _, err := t.exec(t.hubNS, "cat", f)
		if err != nil {
			return 0, err
		}
		sum += parseRxQueue(string(out), port)
	}
	return sum, nil
}

// parseRxQueue sums rx_queue of the sockets bound to port in a
// /proc/net/udp listing.
func parseRxQueue(s string, port uint16) int64 {
	var sum int64
	want := fmt.Sprintf(":%04X", port)
	for _, ln := range strings.Split(s, "\n")[1:] {
		f := strings.Fields(ln)
		if len(f) < 5 || !strings.HasSuffix(f[1], want) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		v, _ := strconv.ParseInt(rx, 16, 64)
		sum += v
	}
	return sum
}
