// Package lab builds the two-gateway setup of the demo and the end-to-end
// tests: two network namespaces joined by a veth pair, a yip-router process
// in each, and traffic generators that run inside the namespaces.
package lab

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/netns"
	"github.com/yip-router/yip-router/router"
)

// Side names one gateway.
type Side int

// The two gateways: A initiates (it has B's endpoint), B answers.
const (
	A Side = 0
	B Side = 1
)

// Options shape a lab.
type Options struct {
	Bin    string // the yip-router binary
	Shards [2]int // per side; 0 means auto
	FEC    [2]string
	Env    []string  // extra environment for the routers (test knobs)
	Extra  [2]string // per side: lines appended to the [Interface] section
	// Symmetric gives both sides the other's Endpoint and a 1 s
	// PersistentKeepalive, so both initiate at start (crossing handshakes).
	Symmetric bool
	Keep      bool // keep logs on Close (tests print them on failure)
	// CPUs per side: a taskset CPU list the router starts under (its
	// shards are chosen from that affinity mask); "" inherits ours.
	CPUs [2]string
	// Endpoint6 gives A B's IPv6 underlay address as Endpoint (the veth
	// carries both families; the routers listen on both by default).
	Endpoint6 bool
	// EndpointName gives A B's endpoint as this host name and the lab's
	// port; what it resolves to is up to the test (/etc/netns/NS/hosts,
	// which ip netns exec mounts over /etc/hosts).
	EndpointName string
	// NAT puts A behind a middle namespace that masquerades A's IPv4
	// traffic with random source ports (iptables MASQUERADE
	// --random-fully), as carrier-grade and many home NATs do. IPv4 only.
	NAT bool
	// PSK, when not zero, is the PresharedKey both sides set for each
	// other (handshakes are then keyed by it: docs/SECURITY.md).
	PSK crypto.PresharedKey
	// Impair puts A and B on one Ethernet segment through a middle
	// namespace whose bridge (internal/impair, goroutines of this
	// process) delays, drops, reorders and rate-limits frames; the
	// middle namespace has no addresses. Exclusive with NAT.
	Impair *impair.Config
}

// Lab is a running two-gateway setup.
type Lab struct {
	opts   Options
	Dir    string
	NS     [2]string
	Ifname [2]string
	keys   [2]crypto.PrivateKey
	procs  [2]*exec.Cmd
	logs   [2]*os.File
	// Underlay (IPv4 and IPv6) and inner addresses.
	Underlay  [2]netip.Addr
	Underlay6 [2]netip.Addr
	Inner4    [2]netip.Addr
	Inner6    [2]netip.Addr
	// NATNS is the middle namespace with Options.NAT ("" otherwise);
	// NATAddr is A's address as B sees it.
	NATNS   string
	NATAddr netip.Addr
	// ImpairNS is the middle namespace with Options.Impair ("" otherwise).
	ImpairNS string
	impaired *Impaired
	closed   bool
}

// Port is the listen port of both routers (not a well-known one: see
// docs/CONFIG.md, ListenPort).
const Port = 47133

// New creates the namespaces, the veth link, keys and configurations.
func New(opts Options) (*Lab, error) {
	if err := netns.Available(); err != nil {
		return nil, err
	}
	var idb [3]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	dir, err := os.MkdirTemp("", "yip-lab-")
	if err != nil {
		return nil, err
	}
	l := &Lab{
		opts: opts, Dir: dir,
		NS:        [2]string{"yipA-" + id, "yipB-" + id},
		Ifname:    [2]string{"ya" + id, "yb" + id},
		Underlay:  [2]netip.Addr{netip.MustParseAddr("172.31.250.1"), netip.MustParseAddr("172.31.250.2")},
		Underlay6: [2]netip.Addr{netip.MustParseAddr("fd00:250::1"), netip.MustParseAddr("fd00:250::2")},
		Inner4:    [2]netip.Addr{netip.MustParseAddr("10.201.0.1"), netip.MustParseAddr("10.202.0.1")},
		Inner6:    [2]netip.Addr{netip.MustParseAddr("fd00:201::1"), netip.MustParseAddr("fd00:202::1")},
	}
	ok := false
	defer func() {
		if !ok {
			l.Close()
		}
	}()
	for _, ns := range l.NS {
		if err := netns.Add(ns); err != nil {
			return nil, err
		}
	}
	if opts.NAT && opts.Impair != nil {
		return nil, errors.New("lab: NAT and Impair are exclusive")
	}
	if opts.NAT {
		if err := l.natLinks(id); err != nil {
			return nil, err
		}
	} else if opts.Impair != nil {
		if err := l.impairLinks(id); err != nil {
			return nil, err
		}
	} else if err := netns.Veth(l.NS[0], "va"+id, l.Underlay[0].String()+"/24", l.NS[1], "vb"+id, l.Underlay[1].String()+"/24"); err != nil {
		return nil, err
	}
	for s := range 2 {
		// nodad: usable at once, not after duplicate address detection.
		if err := netns.IP("-n", l.NS[s], "addr", "add", l.Underlay6[s].String()+"/64", "dev", l.Veth(Side(s)), "nodad"); err != nil {
			return nil, err
		}
	}
	for i := range l.keys {
		if l.keys[i], err = crypto.GeneratePrivateKey(); err != nil {
			return nil, err
		}
	}
	for s := range 2 {
		if err := l.WriteConfig(Side(s), ""); err != nil {
			return nil, err
		}
	}
	ok = true
	return l, nil
}

// natLinks joins A and B through a middle namespace that routes between
// two veth links and masquerades what A sends towards B with random ports.
func (l *Lab) natLinks(id string) error {
	l.NATNS = "yipM-" + id
	l.Underlay[A] = netip.MustParseAddr("172.31.251.1")
	l.NATAddr = netip.MustParseAddr("172.31.250.254")
	if err := netns.Add(l.NATNS); err != nil {
		l.NATNS = ""
		return err
	}
	if err := netns.Veth(l.NS[A], l.Veth(A), l.Underlay[A].String()+"/24", l.NATNS, "ma"+id, "172.31.251.254/24"); err != nil {
		return err
	}
	if err := netns.Veth(l.NATNS, "mb"+id, l.NATAddr.String()+"/24", l.NS[B], l.Veth(B), l.Underlay[B].String()+"/24"); err != nil {
		return err
	}
	for _, cmd := range [][]string{
		{"ip", "netns", "exec", l.NS[A], "ip", "route", "add", "default", "via", "172.31.251.254"},
		{"ip", "netns", "exec", l.NATNS, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", l.NATNS, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", "mb" + id, "-j", "MASQUERADE", "--random-fully"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(cmd, " "), err, out)
		}
	}
	return nil
}

// impairLinks joins A and B through a middle namespace (JoinImpaired).
func (l *Lab) impairLinks(id string) error {
	p, err := JoinImpaired("yipM-"+id, l.NS, [2]string{l.Veth(A), l.Veth(B)},
		[2]string{l.Underlay[A].String() + "/24", l.Underlay[B].String() + "/24"}, l.opts.Impair)
	if err != nil {
		return err
	}
	l.ImpairNS, l.impaired = p.NS, p
	return nil
}

// ImpairStats returns the bridge's counters per direction ([0]: A to B),
// or zeros without Options.Impair.
func (l *Lab) ImpairStats() [2]impair.Stats {
	if l.impaired == nil {
		return [2]impair.Stats{}
	}
	return l.impaired.Stats()
}

// SetImpair changes the running bridge's impairment (Options.Impair only).
func (l *Lab) SetImpair(cfg *impair.Config) error {
	if l.impaired == nil {
		return errors.New("lab: no impairment bridge")
	}
	l.impaired.Set(cfg)
	return nil
}

// Veth is the name of side's veth interface.
func (l *Lab) Veth(s Side) string { return []string{"va", "vb"}[s] + l.NS[0][len("yipA-"):] }

// ConfigPath is side's configuration file.
func (l *Lab) ConfigPath(s Side) string {
	return filepath.Join(l.Dir, fmt.Sprintf("gw-%c.conf", 'a'+rune(s)))
}

// PublicKey is side's public key.
func (l *Lab) PublicKey(s Side) crypto.PublicKey { return l.keys[s].Public() }

// WriteConfig writes side's configuration; extra is appended (more peers).
func (l *Lab) WriteConfig(s Side, extra string) error {
	o := 1 - s
	fecv := l.opts.FEC[s]
	if fecv == "" {
		fecv = "auto"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "[Interface]\nName = %s\nPrivateKey = %s\nListenPort = %d\nAddress = %s/16, %s/64\nFEC = %s\n",
		l.Ifname[s], l.keys[s], Port, l.Inner4[s], l.Inner6[s], fecv)
	if x := l.opts.Extra[s]; x != "" {
		b.WriteString(strings.TrimRight(x, "\n") + "\n")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\nAllowedIPs = %s, %s\n",
		l.keys[o].Public(), netip.PrefixFrom(l.Inner4[o], 16).Masked(), netip.PrefixFrom(l.Inner6[o], 64).Masked())
	if s == A || l.opts.Symmetric {
		ep := netip.AddrPortFrom(l.Underlay[o], Port)
		if l.opts.Endpoint6 && s == A {
			ep = netip.AddrPortFrom(l.Underlay6[o], Port)
		}
		if l.opts.EndpointName != "" && s == A {
			fmt.Fprintf(&b, "Endpoint = %s:%d\n", l.opts.EndpointName, Port)
		} else {
			fmt.Fprintf(&b, "Endpoint = %s\n", ep)
		}
	}
	if l.opts.Symmetric {
		b.WriteString("PersistentKeepalive = 1\n")
	}
	if !l.opts.PSK.IsZero() {
		fmt.Fprintf(&b, "PresharedKey = %s\n", l.opts.PSK)
	}
	b.WriteString(extra)
	return os.WriteFile(l.ConfigPath(s), b.Bytes(), 0o600)
}

// SetEndpoint6 rewrites A's configuration with B's IPv6 (or IPv4)
// underlay address as Endpoint; a SIGHUP applies it.
func (l *Lab) SetEndpoint6(v6 bool) error {
	l.opts.Endpoint6 = v6
	return l.WriteConfig(A, "")
}

// Start runs side's router.
func (l *Lab) Start(s Side) error {
	if l.procs[s] != nil {
		return fmt.Errorf("side %d already running", s)
	}
	shards := "auto"
	if n := l.opts.Shards[s]; n > 0 {
		shards = fmt.Sprint(n)
	}
	logf, err := os.OpenFile(l.LogPath(s), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	argv := []string{"ip", "netns", "exec", l.NS[s], l.opts.Bin, "up", "-c", l.ConfigPath(s), "--shards", shards, "--log-level", "debug"}
	if c := l.opts.CPUs[s]; c != "" {
		argv = append([]string{"taskset", "-c", c}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), l.opts.Env...)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	l.procs[s], l.logs[s] = cmd, logf
	// Up when its control socket answers.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := l.Status(s); err == nil {
			return nil
		}
		if exited(cmd.Process.Pid) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("router %c did not come up; log:\n%s", 'A'+rune(s), l.Log(s))
}

// exited reports whether process pid has exited and waits to be reaped
// (a zombie): up refused to start, so there is no point in waiting for its
// control socket.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// Pid is side's router process id (taskset and ip netns exec exec it in
// place), or 0 when it is not running.
func (l *Lab) Pid(s Side) int {
	if l.procs[s] == nil {
		return 0
	}
	return l.procs[s].Process.Pid
}

// LogPath is side's router log.
func (l *Lab) LogPath(s Side) string {
	return filepath.Join(l.Dir, fmt.Sprintf("gw-%c.log", 'a'+rune(s)))
}

// Log returns side's router log.
func (l *Lab) Log(s Side) string {
	b, _ := os.ReadFile(l.LogPath(s))
	return string(b)
}

// Signal sends sig to side's router (SIGHUP: reload).
func (l *Lab) Signal(s Side, sig syscall.Signal) error {
	if l.procs[s] == nil {
		return errors.New("not running")
	}
	return l.procs[s].Process.Signal(sig)
}

// Stop stops side's router with SIGTERM and waits for it.
func (l *Lab) Stop(s Side) error {
	cmd := l.procs[s]
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		err = errors.New("router did not stop within 10 s of SIGTERM; killed")
		<-done
	}
	l.logs[s].Close()
	l.procs[s], l.logs[s] = nil, nil
	return err
}

// Status asks side's router for its status.
func (l *Lab) Status(s Side) (*router.Status, error) {
	return router.QueryStatus(router.FindSocket(l.Ifname[s]))
}

// Close stops the routers and removes the namespaces and files.
func (l *Lab) Close() {
	if l.closed {
		return
	}
	l.closed = true
	for s := range 2 {
		_ = l.Stop(Side(s))
	}
	for _, ns := range l.NS {
		_ = netns.Del(ns)
	}
	if l.NATNS != "" {
		_ = netns.Del(l.NATNS)
	}
	if l.impaired != nil {
		_ = l.impaired.Close()
	}
	if !l.opts.Keep {
		os.RemoveAll(l.Dir)
	}
}

// Exec runs a command inside side's namespace.
func (l *Lab) Exec(s Side, name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.NS[s], name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), l.NS[s], err, out)
	}
	return string(out), nil
}
