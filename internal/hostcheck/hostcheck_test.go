// Tests of Check against fake hosts: healthy, mistuned and broken ones, a
// config that does not load, no root, and each check's findings.

package hostcheck

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/yip-router/yip-router/config"
)

func TestHealthyHost(t *testing.T) {
	f := newFake(t)
	fs := Check(writeConf(t, ""), f.env(t), Options{})
	expect(t, fs,
		"OK    config: ",
		"OK    privileges: root or CAP_NET_ADMIN",
		"OK    socket buffers: rmem_max 16777216 >= 16777216",
		"OK    socket buffers: wmem_max 8388608 >= 4194304",
		"OK    TUN: opened and closed a 4-queue TUN device",
		"OK    tunnel offloads: on: tso, uso, gro, udp-gso, udp-gro",
		"OK    CPUs: affinity mask 0-3: 4 CPUs on 4 physical cores; Shards = auto (default) gives 4 shard(s) on CPUs 0-3",
		"INFO  CPUs: every CPU of the machine runs a shard",
		"OK    forwarding: net.ipv4.ip_forward = 1",
		"OK    underlay: 203.0.113.2:47133 via eth0: MTU 1500 fits the largest datagram (1480 bytes)",
		"OK    offloads: eth0: generic-receive-offload on",
		"OK    listen port: UDP [::]:47133 is free",
	)
	if e, w := Counts(fs); e != 0 || w != 0 {
		t.Errorf("Counts = %d errors, %d warnings", e, w)
	}
	// No IPv6 AllowedIPs: IPv6 forwarding is not asked for.
	if strings.Contains(report(fs), "ipv6") {
		t.Error("IPv6 forwarding checked for an IPv4-only config")
	}
}

func TestMistunedHost(t *testing.T) {
	f := newFake(t)
	f.smt()
	f.files["proc/sys/net/core/rmem_max"] = "212992\n"
	f.files["proc/sys/net/ipv4/ip_forward"] = "0\n"
	f.files["sys/class/net/eth0/mtu"] = "1400\n"
	f.gro, f.lro = false, true
	fs := Check(writeConf(t, "Shards = 3"), f.env(t), Options{})
	expect(t, fs,
		"INFO  socket buffers: rmem_max 212992 < 16777216: yip-router forces its 16 MiB per socket past it (CAP_NET_ADMIN); other UDP services are capped at it",
		"      fix: run: tuning/yip-tune apply (or: sysctl -w net.core.rmem_max=16777216)",
		"OK    socket buffers: wmem_max",
		"WARN  CPUs: affinity mask 0-3: 4 CPUs on 2 physical cores (SMT on); Shards = 3 gives 3 shard(s) on CPUs 0-2; SMT siblings share a core: 0,2 (",
		"      fix: use --shards auto (one shard per core), or at most 2 shards",
		"WARN  forwarding: net.ipv4.ip_forward = 0",
		"WARN  underlay: 203.0.113.2:47133 via eth0 (MTU 1400): the largest datagram is 1480 bytes",
		"      fix: set MTU = 1330 in [Interface]",
		"WARN  offloads: eth0: generic-receive-offload off",
		"WARN  offloads: eth0: large-receive-offload on",
	)
	if e, w := Counts(fs); e != 0 || w != 4+1 { // 4 topics, offloads twice
		t.Errorf("Counts = %d errors, %d warnings", e, w)
	}
	// Where this process cannot force its buffers (an unprivileged
	// container), neither can the router: the low maximum is a warning.
	f.bufShort = true
	fs = Check(writeConf(t, "Shards = 3"), f.env(t), Options{})
	expect(t, fs,
		"WARN  socket buffers: rmem_max 212992 < 16777216: this process cannot force a socket's 16 MiB past it (no CAP_NET_ADMIN in the host's user namespace, e.g. an unprivileged container), so neither can yip-router run like it: the kernel gives each socket 212992 and bursts will be dropped",
		"      fix: on the host, run: tuning/yip-tune apply (or: sysctl -w net.core.rmem_max=16777216)",
		"OK    socket buffers: wmem_max",
		"WARN  CPUs:", "WARN  forwarding:", "WARN  underlay:", "WARN  offloads:",
	)
	f.bufShort = false
	// auto on the same machine: one shard per core, no SMT warning.
	fs = Check(writeConf(t, ""), f.env(t), Options{Shards: &config.Shards{Auto: true}})
	if !strings.Contains(report(fs), "OK    CPUs: affinity mask 0-3: 4 CPUs on 2 physical cores (SMT on); --shards auto gives 2 shard(s) on CPUs 0-1") {
		t.Errorf("auto on SMT:\n%s", report(fs))
	}
}

func TestErrors(t *testing.T) {
	f := newFake(t)
	f.mask = []int{2, 3}
	f.tunErr[4] = syscall.EINVAL
	f.udpErr = syscall.EADDRINUSE
	fs := Check(writeConf(t, ""), f.env(t), Options{Shards: &config.Shards{N: 4}})
	expect(t, fs,
		"ERROR CPUs: affinity mask 2-3: 2 CPUs on 2 physical cores; --shards 4: 4 shards requested but the CPU affinity mask has 2 CPUs",
		"ERROR TUN: cannot open a 4-queue TUN device: invalid argument",
		"      fix: run with --shards 1",
		"ERROR listen port: cannot bind UDP [::]:47133: address already in use",
	)
	if e, _ := Counts(fs); e != 3 {
		t.Errorf("Counts: %d errors, want 3", e)
	}
	// No multiqueue but one shard: fine.
	f.tunErr[2] = syscall.EINVAL
	fs = Check(writeConf(t, "Shards = 1"), f.env(t), Options{})
	expect(t, fs, "INFO  TUN: single-queue TUN works; a 2-queue device does not", "ERROR listen port")
}

func TestBadConfigStillChecksHost(t *testing.T) {
	f := newFake(t)
	delete(f.files, "dev/net/tun")
	f.files["proc/sys/net/core/wmem_max"] = "1000\n"
	p := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(p, []byte("[Interface]\nMTU = 99999\nFoo = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := Check(p, f.env(t), Options{})
	expect(t, fs,
		"ERROR config: "+p+":1: [Interface] PrivateKey: missing",
		"ERROR config: "+p+":2: [Interface] MTU:",
		"ERROR config: "+p+":3: [Interface] Foo:",
		"      fix: edit "+p,
		"INFO  socket buffers: wmem_max 1000 < 4194304",
		"ERROR TUN: "+filepath.Join(f.dir, "dev/net/tun")+" missing",
	)
	for _, f := range fs {
		if f.Topic == "listen port" || f.Topic == "underlay" {
			t.Errorf("config-dependent check ran on a bad config: %v", f)
		}
	}
}

func TestNotRootAndUnknowns(t *testing.T) {
	f := newFake(t)
	f.offErr = errors.New("operation not supported")
	delete(f.route, netip.MustParseAddr("203.0.113.2"))
	env := f.env(t)
	env.Root = false
	fs := Check(writeConf(t, ""), env, Options{})
	expect(t, fs,
		"ERROR privileges: neither root nor CAP_NET_ADMIN",
		"INFO  TUN: "+filepath.Join(f.dir, "dev/net/tun")+" exists; multiqueue support not tested",
		"WARN  underlay: no route to peer endpoint 203.0.113.2:47133: network unreachable",
	)
	f.route[netip.MustParseAddr("203.0.113.2")] = "eth0"
	fs = Check(writeConf(t, ""), f.env(t), Options{})
	expect(t, fs, "INFO  offloads: eth0: cannot read GRO/LRO: operation not supported")
}

func TestCPUList(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{[]int{0}, "0"}, {[]int{3, 0, 1, 2}, "0-3"}, {[]int{0, 2, 4, 5, 6, 9}, "0,2,4-6,9"}} {
		if got := cpuList(c.in); got != c.want {
			t.Errorf("cpuList(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// An offload the kernel does not offer is a warning with the kernel that
// has it; one the config turns off is said as such, not warned about.
func TestTunnelOffloads(t *testing.T) {
	f := newFake(t)
	f.tunnel.USO = false
	fs := Check(writeConf(t, "DisableOffload = gro, udp-gso"), f.env(t), Options{})
	expect(t, fs,
		"WARN  tunnel offloads: on: tso, udp-gro; off by DisableOffload: gro, udp-gso; not offered by this kernel: uso",
		"      fix: a kernel of 6.2 or later",
	)
	f.tunnel.USO = true
	fs = Check(writeConf(t, "DisableOffload = all"), f.env(t), Options{})
	expect(t, fs, "OK    tunnel offloads: on: none; off by DisableOffload: tso, uso, gro, udp-gso, udp-gro")
}

// The listen port: a well-known one is classified by DPI engines on the
// port alone; none at all is fine when this router initiates to every
// peer, and a warning when a peer must reach it.
func TestListenPortChoice(t *testing.T) {
	f := newFake(t)
	withPort := func(port string, endpoint bool) string {
		c := strings.Replace(confTmpl, "ListenPort = 47133\n", port, 1)
		if !endpoint {
			c = strings.Replace(c, "Endpoint = 203.0.113.2:47133\n", "", 1)
		}
		p := filepath.Join(t.TempDir(), "gw.conf")
		if err := os.WriteFile(p, []byte(strings.Replace(c, "%s", "", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		port     string
		endpoint bool
		want     string
	}{
		{"ListenPort = 51820\n", true, "WARN  listen port: ListenPort 51820 is WireGuard's port"},
		{"ListenPort = 1194\n", true, "WARN  listen port: ListenPort 1194 is OpenVPN's port"},
		{"", true, "INFO  listen port: no ListenPort: a port the kernel picks at each start"},
		{"", false, "WARN  listen port: no ListenPort: the router listens on a port the kernel picks at each start, but the peer at line"},
	} {
		if r := report(Check(withPort(tc.port, tc.endpoint), f.env(t), Options{})); !strings.Contains(r, tc.want) {
			t.Errorf("%q endpoint=%v: no %q in\n%s", tc.port, tc.endpoint, tc.want, r)
		}
	}
	// The peer on the old default port probably relies on ours too.
	old := withPort("", true)
	b, _ := os.ReadFile(old)
	if err := os.WriteFile(old, []byte(strings.Replace(string(b), "203.0.113.2:47133", "203.0.113.2:51820", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := report(Check(old, f.env(t), Options{})); !strings.Contains(r, "WARN  listen port: no ListenPort, and the peer at line") {
		t.Errorf("no warning for a peer on the old default port:\n%s", r)
	}
}

// check says "ready" only when up would run as asked: a key file others
// may read, and no CAP_BPF for the steering program, are WARNs; fixes name
// yip-tune as this machine has it.
func TestKeyFileBPFAndTuneName(t *testing.T) {
	f := newFake(t)
	f.files["proc/sys/net/core/rmem_max"] = "212992\n"
	env := f.env(t)
	env.NoBPF = true
	env.Tune = "yip-tune"
	dir := t.TempDir()
	key := filepath.Join(dir, "gw.key")
	if err := os.WriteFile(key, []byte("mEktyZiojIy60rG4S9RRaZ7YANfmaKua/Unus6HfIGg=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "gw.conf")
	text := strings.Replace(fmt.Sprintf(confTmpl, ""), "PrivateKey = mEktyZiojIy60rG4S9RRaZ7YANfmaKua/Unus6HfIGg=", "PrivateKeyFile = "+key, 1)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := Check(conf, env, Options{})
	rep := report(fs)
	for _, want := range []string{
		"WARN  config: key file " + key + " (mode 0644) is readable by group or others",
		"fix: chmod 600 " + key + "\n",
		"WARN  privileges: no CAP_BPF",
		"run: yip-tune apply",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "tuning/yip-tune") {
		t.Errorf("a fix names the source tree's path where yip-tune is installed:\n%s", rep)
	}
}

// An Endpoint host name that does not resolve is a warning, as up logs it,
// not an error: the router starts and looks it up again.
func TestUnresolvedEndpointWarns(t *testing.T) {
	f := newFake(t)
	p := writeConf(t, "")
	b, _ := os.ReadFile(p)
	// .invalid never resolves (RFC 6761); without a resolver the lookup
	// fails too.
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "203.0.113.2:47133", "gw.invalid:47133", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := Check(p, f.env(t), Options{})
	expect(t, fs, `WARN  config: `+p+`:8: [Peer] Endpoint: cannot resolve "gw.invalid"`)
	if errs, _ := Counts(fs); errs != 0 {
		t.Errorf("%d errors for a name that does not resolve:\n%s", errs, report(fs))
	}
}

// What check says about Table, FwMark, a full tunnel and hooks; strict
// reverse-path filtering on the underlay of an IPv4 full tunnel is a
// warning with the fix.
func TestRoutingAndHooks(t *testing.T) {
	conf := func(iface, allowed string) string {
		p := filepath.Join(t.TempDir(), "gw.conf")
		text := strings.Replace(fmt.Sprintf(confTmpl, iface), "AllowedIPs = 10.77.0.2/32, 192.168.2.0/24", "AllowedIPs = "+allowed, 1)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := newFake(t)
	f.files["proc/sys/net/ipv4/conf/all/rp_filter"] = "0\n"
	f.files["proc/sys/net/ipv4/conf/eth0/rp_filter"] = "1\n"
	f.files["proc/sys/net/ipv6/conf/all/forwarding"] = "1\n"
	env := f.env(t)
	var asked []uint32
	env.RouteTo = func(a netip.Addr, mark uint32) (string, error) {
		asked = append(asked, mark)
		return "eth0", nil
	}
	env.FullTunnelMark = func(fwmark uint32) (uint32, error) { return 51821, nil }
	fs := Check(conf("PostUp = true\nPostDown = true\nPostDown = false", "0.0.0.0/0, ::/0"), env, Options{})
	expect(t, fs,
		`OK    routes: full tunnel for IPv4 (0.0.0.0/0, peer at line 8) and IPv6 (::/0, peer at line 8), as wg-quick: the default route goes into table 51821, every underlay socket carries fwmark 0xca6d (the first table from 51820 that holds no route; 51820 holds routes now: this router's own, if it runs), rules "lookup main suppress_prefixlength 0" then "not fwmark 0xca6d lookup 51821"`,
		"WARN  routes: strict reverse-path filtering (rp_filter = 1) on eth0: if the main table reaches 203.0.113.2 by its default route, up refuses the full tunnel",
		"      fix: run: sysctl -w net.ipv4.conf.eth0.rp_filter=2 (loose)",
		"INFO  hooks: 0 PreUp, 1 PostUp, 0 PreDown, 2 PostDown command(s): run with /bin/sh -c as the router's user",
	)
	if len(asked) == 0 || asked[0] != 51820 {
		t.Errorf("endpoint routes looked up with marks %v, want the router's 51820", asked)
	}

	f.files["proc/sys/net/ipv4/conf/eth0/rp_filter"] = "2\n"
	env = f.env(t)
	fs = Check(conf("FwMark = 0x2a\nTable = 1234", "0.0.0.0/0"), env, Options{})
	expect(t, fs, "INFO  routes: Table = 1234: the peers' AllowedIPs are routed in table 1234, and no policy rule")
	if r := report(fs); strings.Contains(r, "full tunnel") || !strings.Contains(r, "FwMark 0x2a: every underlay socket carries it") {
		t.Errorf("Table = 1234 with a default route and FwMark:\n%s", r)
	}
	fs = Check(conf("FwMark = 7", "0.0.0.0/0"), env, Options{})
	expect(t, fs, `OK    routes: full tunnel for IPv4 (0.0.0.0/0, peer at line 6), as wg-quick: the default route goes into table 7, every underlay socket carries fwmark 0x7 (FwMark)`)
	fs = Check(conf("Table = off", "0.0.0.0/0"), env, Options{})
	expect(t, fs, "INFO  routes: Table = off: no routes for the peers' AllowedIPs")
}
