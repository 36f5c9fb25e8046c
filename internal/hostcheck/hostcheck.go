// Package hostcheck is `yip-router check`: it validates a config without
// starting anything, then inspects the host the router would run on —
// socket buffer maxima, TUN (multiqueue) support, CPU affinity and SMT
// layout versus the shard count, forwarding, the underlay interface's MTU
// and offloads, and whether the ports are free — and says how to fix what
// it finds.
//
// Every input from the machine goes through Env, so tests run the checks
// against fake /proc and /sys trees and fake probes, as any user.
package hostcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/cpuplan"
	"github.com/yip-router/yip-router/internal/fulltunnel"
)

// SocketBuffer is what each shard socket asks for (shard/udp's
// bufferSize). The router forces it past net.core.rmem_max / wmem_max
// with the CAP_NET_ADMIN it runs with; other UDP services on the gateway
// are capped at those maxima without being told.
const SocketBuffer = 4 << 20

// Overheads for the MTU rule of docs/CONFIG.md: the largest datagram is
// MTU + 42 bytes of yip-router overhead + the UDP/IP headers.
const (
	datagramOverhead = 42
	udp4Headers      = 28
	udp6Headers      = 48
)

// Level is a finding's severity.
type Level int

// Levels, mildest first. Only Error makes check exit non-zero.
const (
	OK Level = iota
	Info
	Warn
	Error
)

func (l Level) String() string { return [...]string{"OK", "INFO", "WARN", "ERROR"}[l] }

// Finding is one line of the report.
type Finding struct {
	Level Level
	Topic string // "socket buffers", "TUN", ...
	Msg   string
	Fix   string // what to do; "" for OK and most INFO
}

func (f Finding) String() string {
	s := fmt.Sprintf("%-5s %s: %s", f.Level, f.Topic, f.Msg)
	if f.Fix != "" {
		s += "\n      fix: " + f.Fix
	}
	return s
}

// Env is the machine as the checks see it. Zero fields take the real
// machine's (see Real), except Root: pass Real() for this machine.
type Env struct {
	Proc string // "/proc"
	Sys  string // "/sys"
	Dev  string // "/dev"
	Root bool   // running as root or with CAP_NET_ADMIN: up can run, TUN can be probed
	// NoBPF: the process holds neither CAP_BPF nor CAP_SYS_ADMIN, so up
	// could not load the eBPF steering program.
	NoBPF bool
	// Tune is how fixes name yip-tune: "yip-tune" where it is installed
	// on PATH, else its path in the source tree.
	Tune string
	// AffinityCPUs is the process's CPU affinity mask.
	AffinityCPUs func() ([]int, error)
	// OpenTUN creates and removes a TUN device with the given queues
	// (tried only when Root).
	OpenTUN func(queues int) error
	// RouteTo names the interface the kernel would send to dst through,
	// for a datagram with firewall mark mark (0: none).
	RouteTo func(dst netip.Addr, mark uint32) (string, error)
	// FullTunnelMark is the mark (and table) a full tunnel would take
	// now (fulltunnel.ChooseMark).
	FullTunnelMark func(fwmark uint32) (uint32, error)
	// Offloads reports an interface's GRO and LRO (ok=false: unknown, with
	// why).
	Offloads func(ifname string) (gro, lro bool, err error)
	// ProbeOffloads opens a TUN device and a UDP socket with every offload
	// asked for and reports what the kernel granted (tried only when
	// Root).
	ProbeOffloads func() (config.OffloadSet, error)
	// SocketBuffers opens a UDP socket as yip-router up does and reports
	// whether its buffers came out smaller than it asked for (it could
	// not force them past the host's maxima).
	SocketBuffers func() (short bool, err error)
	// ListenUDP and ListenTCP try to bind an address and release it.
	ListenUDP func(netip.AddrPort) error
	ListenTCP func(netip.AddrPort) error
}

// Options are check's command-line overrides.
type Options struct {
	Shards *config.Shards // --shards; nil: the config's
}

// Counts tallies a report's findings by level.
func Counts(fs []Finding) (errs, warns int) {
	for _, f := range fs {
		switch f.Level {
		case Error:
			errs++
		case Warn:
			warns++
		}
	}
	return errs, warns
}

// Check loads the config at path and inspects the host. A config that does
// not load gives ERROR findings; the host checks that do not need it run
// anyway.
func Check(path string, env Env, opts Options) []Finding {
	env = env.withDefaults()
	var out []Finding
	add := func(l Level, topic, fix, format string, args ...any) {
		out = append(out, Finding{Level: l, Topic: topic, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	cfg, err := config.Load(path)
	if err != nil {
		var all []error
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			all = j.Unwrap()
		} else {
			all = []error{err}
		}
		for _, e := range all {
			add(Error, "config", "", "%v", e)
		}
		out[len(out)-1].Fix = "edit " + path + " (every key is described in docs/CONFIG.md)"
	} else {
		add(OK, "config", "", "%s: interface %s, listen port %d, %d peer(s), MTU %d", path, cfg.Interface.Name, cfg.Interface.ListenPort, len(cfg.Peers), cfg.Interface.MTU)
		for _, w := range cfg.Warnings {
			add(Warn, "config", "", "%v", w)
		}
		for _, f := range cfg.ExposedSecretFiles() {
			file, _, _ := strings.Cut(f, " (mode ")
			add(Warn, "config", "chmod 600 "+file, "key file %s is readable by group or others (up warns too)", f)
		}
	}
	out = append(out, env.privileges()...)
	out = append(out, env.socketBuffers()...)
	out = append(out, env.tunCheck(shardCount(cfg, opts, env))...)
	out = append(out, env.offloadCheck(cfg)...)
	out = append(out, env.cpus(cfg, opts)...)
	out = append(out, env.forwarding(cfg)...)
	if cfg != nil {
		out = append(out, env.routing(cfg)...)
		out = append(out, hooks(cfg)...)
		out = append(out, env.underlay(cfg)...)
		out = append(out, env.ports(cfg)...)
	}
	return out
}

// TuneCmd is how a fix names yip-tune on this machine.
func (e Env) TuneCmd() string { return e.withDefaults().Tune }

func (e Env) withDefaults() Env {
	r := Real()
	if e.Tune == "" {
		e.Tune = r.Tune
	}
	if e.Proc == "" {
		e.Proc = r.Proc
	}
	if e.Sys == "" {
		e.Sys = r.Sys
	}
	if e.Dev == "" {
		e.Dev = r.Dev
	}
	if e.AffinityCPUs == nil {
		e.AffinityCPUs = r.AffinityCPUs
	}
	if e.OpenTUN == nil {
		e.OpenTUN = r.OpenTUN
	}
	if e.RouteTo == nil {
		e.RouteTo = r.RouteTo
	}
	if e.FullTunnelMark == nil {
		e.FullTunnelMark = r.FullTunnelMark
	}
	if e.Offloads == nil {
		e.Offloads = r.Offloads
	}
	if e.ProbeOffloads == nil {
		e.ProbeOffloads = r.ProbeOffloads
	}
	if e.ListenUDP == nil {
		e.ListenUDP = r.ListenUDP
	}
	if e.ListenTCP == nil {
		e.ListenTCP = r.ListenTCP
	}
	return e
}

func (e Env) readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func (e Env) privileges() []Finding {
	if e.Root {
		out := []Finding{{Level: OK, Topic: "privileges", Msg: "root or CAP_NET_ADMIN: yip-router up can create the TUN device"}}
		if e.NoBPF {
			out = append(out, Finding{Level: Warn, Topic: "privileges",
				Msg: "no CAP_BPF (nor CAP_SYS_ADMIN): up cannot load the eBPF steering program and steers datagrams by source port; lanes whose ports a NAT rewrites then take a hop between shards, and flood isolation is off (datagrams from strangers share the lane sockets' buffers)",
				Fix: "grant CAP_BPF (the systemd unit does: AmbientCapabilities=CAP_NET_ADMIN CAP_BPF), or run as root"})
		}
		return out
	}
	// up would fail on TUNSETIFF: an error, so check exits 1 (a config
	// can still be checked this way; its findings come first).
	return []Finding{{Level: Error, Topic: "privileges", Msg: "neither root nor CAP_NET_ADMIN: yip-router up would fail (TUN device, addresses, routes); the TUN probe below is skipped",
		Fix: "run as root (sudo), or through the systemd unit tuning/yip-router@.service (AmbientCapabilities=CAP_NET_ADMIN)"}}
}

func (e Env) socketBuffers() []Finding {
	var out []Finding
	// Whether this process's sockets can pass the maxima (CAP_NET_ADMIN
	// in the host's user namespace), as the router's do.
	forced := false
	if e.SocketBuffers != nil {
		short, err := e.SocketBuffers()
		forced = err == nil && !short
	}
	for _, k := range []string{"rmem_max", "wmem_max"} {
		p := filepath.Join(e.Proc, "sys/net/core", k)
		v, err := e.readInt(p)
		switch {
		case err != nil:
			out = append(out, Finding{Level: Info, Topic: "socket buffers", Msg: fmt.Sprintf("cannot read %s: %v", p, err)})
		case v >= SocketBuffer:
			out = append(out, Finding{Level: OK, Topic: "socket buffers", Msg: fmt.Sprintf("%s %d >= %d", k, v, SocketBuffer)})
		case forced:
			out = append(out, Finding{Level: Info, Topic: "socket buffers",
				Msg: fmt.Sprintf("%s %d < %d: yip-router forces its 4 MiB per socket past it (CAP_NET_ADMIN); other UDP services are capped at it", k, v, SocketBuffer),
				Fix: fmt.Sprintf("run: %s apply (or: sysctl -w net.core.%s=%d)", e.Tune, k, SocketBuffer)})
		default:
			out = append(out, Finding{Level: Warn, Topic: "socket buffers",
				Msg: fmt.Sprintf("%s %d < %d: this process cannot force a socket's 4 MiB past it (no CAP_NET_ADMIN in the host's user namespace, e.g. an unprivileged container), so neither can yip-router run like it: the kernel gives each socket %d and bursts will be dropped", k, v, SocketBuffer, v),
				Fix: fmt.Sprintf("on the host, run: %s apply (or: sysctl -w net.core.%s=%d)", e.Tune, k, SocketBuffer)})
		}
	}
	return out
}

// shardSetting is the setting up would run with (--shards, else the config's,
// else auto) and where it comes from, as the report names it.
func shardSetting(cfg *config.Config, opts Options) (s config.Shards, from string) {
	s, from = config.Shards{Auto: true}, "Shards = auto (default)"
	if cfg != nil && !cfg.Interface.Shards.Auto {
		s, from = cfg.Interface.Shards, "Shards = "+cfg.Interface.Shards.String()
	}
	if opts.Shards != nil {
		s, from = *opts.Shards, "--shards "+opts.Shards.String()
	}
	return s, from
}

// shardCount is the number of shards up would start, or 0 when it cannot
// tell.
func shardCount(cfg *config.Config, opts Options, env Env) int {
	s, _ := shardSetting(cfg, opts)
	if !s.Auto {
		return s.N
	}
	mask, err := env.AffinityCPUs()
	if err != nil {
		return 0
	}
	cpus, err := cpuplan.Choose(mask, s, env.Sys)
	if err != nil {
		return 0
	}
	return len(cpus)
}

func (e Env) tunCheck(shards int) []Finding {
	const topic = "TUN"
	dev := filepath.Join(e.Dev, "net/tun")
	if _, err := os.Stat(dev); err != nil {
		return []Finding{{Level: Error, Topic: topic, Msg: fmt.Sprintf("%s missing: %v", dev, err),
			Fix: "load the tun module: modprobe tun (in a container: pass --device /dev/net/tun)"}}
	}
	if !e.Root {
		return []Finding{{Level: Info, Topic: topic, Msg: dev + " exists; multiqueue support not tested (needs root)"}}
	}
	queues := max(shards, 2)
	if err := e.OpenTUN(queues); err != nil {
		if shards > 1 {
			return []Finding{{Level: Error, Topic: topic, Msg: fmt.Sprintf("cannot open a %d-queue TUN device: %v", queues, err),
				Fix: "run with --shards 1 (single-queue TUN), or use a kernel with multiqueue TUN (3.8+)"}}
		}
		if err1 := e.OpenTUN(1); err1 != nil {
			return []Finding{{Level: Error, Topic: topic, Msg: fmt.Sprintf("cannot open a TUN device: %v", err1),
				Fix: "check that " + dev + " is usable here (container device policy, CAP_NET_ADMIN)"}}
		}
		return []Finding{{Level: Info, Topic: topic, Msg: fmt.Sprintf("single-queue TUN works; a %d-queue device does not (%v): fine for 1 shard", queues, err)}}
	}
	return []Finding{{Level: OK, Topic: topic, Msg: fmt.Sprintf("opened and closed a %d-queue TUN device", queues)}}
}

// core names a CPU's physical core, as cpuplan.Choose groups them.
func (e Env) core(cpu int) string { return cpuplan.PhysicalCore(e.Sys, cpu) }

func (e Env) cpus(cfg *config.Config, opts Options) []Finding {
	const topic = "CPUs"
	mask, err := e.AffinityCPUs()
	if err != nil || len(mask) == 0 {
		return []Finding{{Level: Error, Topic: topic, Msg: fmt.Sprintf("cannot read the CPU affinity mask: %v", err)}}
	}
	s, from := shardSetting(cfg, opts)
	cores := map[string][]int{}
	var order []string
	for _, c := range mask {
		k := e.core(c)
		if cores[k] == nil {
			order = append(order, k)
		}
		cores[k] = append(cores[k], c)
	}
	layout := fmt.Sprintf("affinity mask %s: %d CPUs on %d physical cores", cpuList(mask), len(mask), len(order))
	if len(order) < len(mask) {
		layout += " (SMT on)"
	}
	chosen, err := cpuplan.Choose(mask, s, e.Sys)
	if err != nil {
		return []Finding{{Level: Error, Topic: topic, Msg: fmt.Sprintf("%s; %s: %v", layout, from, err),
			Fix: fmt.Sprintf("use --shards auto or at most %d shards, or widen the mask (taskset -c LIST yip-router up ..., or CPUAffinity= in the systemd unit)", len(mask))}}
	}
	var out []Finding
	msg := fmt.Sprintf("%s; %s gives %d shard(s) on CPUs %s", layout, from, len(chosen), cpuList(chosen))
	used := map[string][]int{}
	for _, c := range chosen {
		used[e.core(c)] = append(used[e.core(c)], c)
	}
	var shared []string
	for _, k := range order {
		if len(used[k]) > 1 {
			shared = append(shared, cpuList(used[k]))
		}
	}
	if len(shared) > 0 {
		out = append(out, Finding{Level: Warn, Topic: topic,
			Msg: msg + "; SMT siblings share a core: " + strings.Join(shared, "; ") + " (two shards on one core fight over its execution units)",
			Fix: fmt.Sprintf("use --shards auto (one shard per core), or at most %d shards", len(order))})
	} else {
		out = append(out, Finding{Level: OK, Topic: topic, Msg: msg})
	}
	online := e.onlineCPUs()
	if online > 0 && len(chosen) >= online {
		out = append(out, Finding{Level: Info, Topic: topic,
			Msg: "every CPU of the machine runs a shard: NIC interrupts and the kernel's network stack share them (fine on small routers; see docs/DEPLOY.md to keep cores for IRQs)"})
	}
	return out
}

func (e Env) onlineCPUs() int {
	b, err := os.ReadFile(filepath.Join(e.Sys, "devices/system/cpu/online"))
	if err != nil {
		return 0
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if ok {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return 0
		}
		n += z - a + 1
	}
	return n
}

// cpuList formats CPUs as a taskset list ("0-3,6").
func cpuList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		} else {
			parts = append(parts, strconv.Itoa(c[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func (e Env) forwarding(cfg *config.Config) []Finding {
	want4, want6 := true, true
	if cfg != nil {
		want4, want6 = false, false
		for _, p := range cfg.Peers {
			for _, a := range p.AllowedIPs {
				if a.Addr().Is4() {
					want4 = true
				} else {
					want6 = true
				}
			}
		}
	}
	var out []Finding
	for _, f := range []struct {
		want       bool
		file, name string
	}{
		{want4, "sys/net/ipv4/ip_forward", "net.ipv4.ip_forward"},
		{want6, "sys/net/ipv6/conf/all/forwarding", "net.ipv6.conf.all.forwarding"},
	} {
		if !f.want {
			continue
		}
		v, err := e.readInt(filepath.Join(e.Proc, f.file))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, Finding{Level: Info, Topic: "forwarding", Msg: f.name + " not present (protocol disabled in this kernel?)"})
		case err != nil:
			out = append(out, Finding{Level: Info, Topic: "forwarding", Msg: fmt.Sprintf("cannot read %s: %v", f.name, err)})
		case v == 1:
			out = append(out, Finding{Level: OK, Topic: "forwarding", Msg: f.name + " = 1"})
		default:
			out = append(out, Finding{Level: Warn, Topic: "forwarding",
				Msg: fmt.Sprintf("%s = %d: this host reaches the peers' AllowedIPs itself, but will not route its LAN's packets through the tunnel", f.name, v),
				Fix: fmt.Sprintf("on a gateway, run: %s apply (or: sysctl -w %s=1)", e.Tune, f.name)})
		}
	}
	return out
}

// underlayMark is the mark the router's sockets carry, for the route
// lookups towards the endpoints: FwMark, else for a full tunnel the mark
// a router starting alone would pick (a running one holds that table, so
// ChooseMark would skip it).
func underlayMark(cfg *config.Config) uint32 {
	if v4, v6 := cfg.FullTunnel(); cfg.Interface.FwMark == 0 && (v4 || v6) {
		return fulltunnel.DefaultMark
	}
	return cfg.Interface.FwMark
}

// routing says where the routes for AllowedIPs go (Table), what a full
// tunnel sets up (as wg-quick: a table, a mark, two rules per family) and
// whether strict reverse-path filtering would kill it.
func (e Env) routing(cfg *config.Config) []Finding {
	const topic = "routes"
	ic := cfg.Interface
	var out []Finding
	add := func(l Level, fix, format string, args ...any) {
		out = append(out, Finding{Level: l, Topic: topic, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	switch ic.Table.Mode {
	case config.TableOff:
		add(Info, "", "Table = off: no routes for the peers' AllowedIPs; route them yourself (e.g. in PostUp)")
	case config.TableID:
		add(Info, "", "Table = %s: the peers' AllowedIPs are routed in table %d, and no policy rule sends traffic there: add your own (ip rule, e.g. in PostUp)", ic.Table, ic.Table.ID)
	}
	v4, v6 := cfg.FullTunnel()
	if !v4 && !v6 {
		if ic.FwMark != 0 {
			add(Info, "", "FwMark %#x: every underlay socket carries it, for your own ip rule or firewall", ic.FwMark)
		}
		return out
	}
	var fams []string
	for _, f := range []struct {
		on           bool
		name, prefix string
	}{{v4, "IPv4", "0.0.0.0/0"}, {v6, "IPv6", "::/0"}} {
		if !f.on {
			continue
		}
		for _, p := range cfg.Peers {
			if slices.Contains(p.AllowedIPs, netip.MustParsePrefix(f.prefix)) {
				fams = append(fams, fmt.Sprintf("%s (%s, peer at line %d)", f.name, f.prefix, p.Line))
			}
		}
	}
	m, how := ic.FwMark, "FwMark"
	if m == 0 {
		how = fmt.Sprintf("the first table from %d that holds no route", fulltunnel.DefaultMark)
		var err error
		if m, err = e.FullTunnelMark(0); err != nil {
			add(Warn, "set FwMark", "full tunnel: cannot pick its mark and table: %v", err)
			m = fulltunnel.DefaultMark
		} else if m != fulltunnel.DefaultMark {
			how += fmt.Sprintf("; %d holds routes now: this router's own, if it runs", fulltunnel.DefaultMark)
		}
	}
	rules := fulltunnel.Rules(m)
	add(OK, "", "full tunnel for %s, as wg-quick: the default route goes into table %d, every underlay socket carries fwmark %#x (%s), rules %q then %q",
		strings.Join(fams, " and "), m, m, how, rules[0], rules[1])
	if !v4 {
		return out
	}
	seen := map[string]bool{}
	for _, p := range cfg.Peers {
		if !p.Endpoint.Addr().Is4() {
			continue
		}
		ifname, err := e.RouteTo(p.Endpoint.Addr(), underlayMark(cfg))
		if err != nil || seen[ifname] {
			continue // underlay says what is wrong with the route
		}
		seen[ifname] = true
		if rp, err := fulltunnel.RPFilter(e.Proc, ifname); err == nil && rp == 1 {
			add(Warn, "run: "+fulltunnel.StrictRPFix(ifname),
				"strict reverse-path filtering (rp_filter = 1) on %s: if the main table reaches %s by its default route, up refuses the full tunnel (the peer's datagrams would be dropped: their source routes into the tunnel)",
				ifname, p.Endpoint.Addr())
		}
	}
	return out
}

// hooks reports the PreUp, PostUp, PreDown and PostDown commands, and a
// config file others may change while it holds them.
func hooks(cfg *config.Config) []Finding {
	h := cfg.Interface.Hooks
	if h.Empty() {
		return nil
	}
	out := []Finding{{Level: Info, Topic: "hooks",
		Msg: fmt.Sprintf("%d PreUp, %d PostUp, %d PreDown, %d PostDown command(s): run with /bin/sh -c as the router's user (%%i: the interface's name)",
			len(h.PreUp), len(h.PostUp), len(h.PreDown), len(h.PostDown))}}
	if f := cfg.WritableHookFile(); f != "" {
		out = append(out, Finding{Level: Warn, Topic: "hooks", Msg: f + ": whoever can change it runs commands as the router's user",
			Fix: "chown root " + cfg.Path + "; chmod go-w " + cfg.Path})
	}
	return out
}

// underlay finds the interfaces towards the peers' endpoints and checks
// their MTU against the config's and their receive offloads.
func (e Env) underlay(cfg *config.Config) []Finding {
	const topic = "underlay"
	var out []Finding
	seen := map[string]bool{}
	n := 0
	for _, p := range cfg.Peers {
		if !p.Endpoint.IsValid() {
			continue
		}
		n++
		dst := p.Endpoint.Addr().Unmap()
		ifname, err := e.RouteTo(dst, underlayMark(cfg))
		if err != nil {
			out = append(out, Finding{Level: Warn, Topic: topic, Msg: fmt.Sprintf("no route to peer endpoint %s: %v", p.Endpoint, err),
				Fix: "check the gateway's routing table (ip route get " + dst.String() + ")"})
			continue
		}
		hdr := udp4Headers
		if dst.Is6() {
			hdr = udp6Headers
		}
		mtuPath := filepath.Join(e.Sys, "class/net", ifname, "mtu")
		if mtu, err := e.readInt(mtuPath); err != nil {
			out = append(out, Finding{Level: Info, Topic: topic, Msg: fmt.Sprintf("%s via %s: cannot read its MTU: %v", p.Endpoint, ifname, err)})
		} else if need := cfg.Interface.MTU + datagramOverhead + hdr; int64(need) > mtu {
			out = append(out, Finding{Level: Warn, Topic: topic,
				Msg: fmt.Sprintf("%s via %s (MTU %d): the largest datagram is %d bytes (MTU %d + %d + %d headers) and will be fragmented or dropped (MTU black hole)", p.Endpoint, ifname, mtu, need, cfg.Interface.MTU, datagramOverhead, hdr),
				Fix: fmt.Sprintf("set MTU = %d in [Interface] (see docs/CONFIG.md, MTU)", mtu-int64(datagramOverhead+hdr))})
		} else {
			out = append(out, Finding{Level: OK, Topic: topic, Msg: fmt.Sprintf("%s via %s: MTU %d fits the largest datagram (%d bytes)", p.Endpoint, ifname, mtu, need)})
		}
		if seen[ifname] {
			continue
		}
		seen[ifname] = true
		out = append(out, e.offloads(ifname)...)
	}
	if n == 0 {
		msg := "no peer has an Endpoint (responder only): the underlay interface is not known until peers connect; MTU and offloads not checked"
		for _, p := range cfg.Peers {
			if p.HasEndpoint() {
				msg = "no peer's Endpoint has an address now (a host name that does not resolve): the underlay interface is not known; MTU and offloads not checked"
				break
			}
		}
		out = append(out, Finding{Level: Info, Topic: topic, Msg: msg})
	}
	return out
}

// offloadCheck says which of yip-router's own offloads this kernel grants
// (TUN TSO/USO and coalesced writes, UDP GSO/GRO) and which the config
// turns off. A missing one is a warning: the router runs without it, at a
// cost in throughput per core.
func (e Env) offloadCheck(cfg *config.Config) []Finding {
	const topic = "tunnel offloads"
	if !e.Root {
		return nil
	}
	got, err := e.ProbeOffloads()
	if err != nil {
		return []Finding{{Level: Info, Topic: topic, Msg: fmt.Sprintf("cannot probe: %v", err)}}
	}
	var dis config.OffloadSet
	if cfg != nil {
		dis = cfg.Interface.DisableOffload
	}
	var on, off, missing []string
	for _, n := range config.OffloadNames() {
		switch {
		case dis.Has(n):
			off = append(off, n)
		case got.Has(n):
			on = append(on, n)
		default:
			missing = append(missing, n)
		}
	}
	msg := "on: " + strings.Join(on, ", ")
	if len(on) == 0 {
		msg = "on: none"
	}
	if len(off) > 0 {
		msg += "; off by DisableOffload: " + strings.Join(off, ", ")
	}
	if len(missing) > 0 {
		return []Finding{{Level: Warn, Topic: topic, Msg: msg + "; not offered by this kernel: " + strings.Join(missing, ", "),
			Fix: "a kernel of 6.2 or later has every one (USO arrived in 6.2, UDP GRO is reliable from 5.12)"}}
	}
	return []Finding{{Level: OK, Topic: topic, Msg: msg}}
}

func (e Env) offloads(ifname string) []Finding {
	const topic = "offloads"
	gro, lro, err := e.Offloads(ifname)
	if err != nil {
		return []Finding{{Level: Info, Topic: topic, Msg: fmt.Sprintf("%s: cannot read GRO/LRO: %v", ifname, err)}}
	}
	var out []Finding
	if gro {
		out = append(out, Finding{Level: OK, Topic: topic, Msg: ifname + ": generic-receive-offload on"})
	} else {
		out = append(out, Finding{Level: Warn, Topic: topic, Msg: ifname + ": generic-receive-offload off: the kernel handles every received packet one by one (more softirq time on the CPUs taking the NIC's interrupts)",
			Fix: "ethtool -K " + ifname + " gro on"})
	}
	if lro {
		out = append(out, Finding{Level: Warn, Topic: topic, Msg: ifname + ": large-receive-offload on: LRO merges packets a router must forward unchanged",
			Fix: "ethtool -K " + ifname + " lro off (the kernel also turns it off when forwarding is enabled)"})
	}
	return out
}

func (e Env) ports(cfg *config.Config) []Finding {
	var out []Finding
	bind := cfg.Interface.ListenAddress
	if !bind.IsValid() {
		bind = netip.IPv6Unspecified() // as the router: both families
	}
	ap := netip.AddrPortFrom(bind, cfg.Interface.ListenPort)
	out = append(out, portChoice(cfg)...)
	if cfg.Interface.ListenPort == 0 {
		return append(out, e.metricsPort(cfg)...)
	}
	if err := e.ListenUDP(ap); err != nil {
		fix := fmt.Sprintf("stop what holds it (ss -ulpn 'sport = :%d' names it; if it is this router, already running, that is expected) or change ListenPort", ap.Port())
		if errors.Is(err, errPerm) {
			fix = "run as root, or choose ListenPort >= 1024"
		}
		out = append(out, Finding{Level: Error, Topic: "listen port", Msg: fmt.Sprintf("cannot bind UDP %s: %v", ap, err), Fix: fix})
	} else {
		out = append(out, Finding{Level: OK, Topic: "listen port", Msg: fmt.Sprintf("UDP %s is free; it is the only port peers need to reach (the lane sockets use ephemeral ports)", ap)})
	}
	return append(out, e.metricsPort(cfg)...)
}

// wellKnownUDP are UDP ports that DPI engines (nDPI, OpenGFW) map to a
// protocol by port alone: a tunnel on one of them is classified, and
// blockable, without looking at a byte.
var wellKnownUDP = map[uint16]string{
	51820: "WireGuard", 51821: "WireGuard", 1194: "OpenVPN", 500: "IKE (IPsec)", 4500: "IPsec NAT-T",
	1701: "L2TP", 443: "QUIC", 53: "DNS", 123: "NTP", 3478: "STUN/TURN", 5060: "SIP",
	4789: "VXLAN", 6081: "Geneve", 1812: "RADIUS", 1813: "RADIUS accounting",
}

// portChoice reports what the ListenPort setting means for peers and for
// a classifier on the path.
func portChoice(cfg *config.Config) []Finding {
	port := cfg.Interface.ListenPort
	if port == 0 {
		for _, p := range cfg.Peers {
			if !p.HasEndpoint() {
				return []Finding{{Level: Warn, Topic: "listen port",
					Msg: fmt.Sprintf("no ListenPort: the router listens on a port the kernel picks at each start, but the peer at line %d has no Endpoint and can only reach this router at a fixed port", p.Line),
					Fix: "set ListenPort to a port of your choosing (not a well-known one) and give it to that peer as Endpoint"}}
			}
			if p.Endpoint.Port() == 51820 {
				return []Finding{{Level: Warn, Topic: "listen port",
					Msg: fmt.Sprintf("no ListenPort, and the peer at line %d listens on 51820, the old default: if it has this router as Endpoint at 51820 too, it can no longer reach it (ListenPort has no default any more; the kernel picks a port at each start)", p.Line),
					Fix: "set ListenPort (51820 keeps the old behaviour, but DPI engines classify it as WireGuard; better choose another port on both sides)"}}
			}
		}
		return []Finding{{Level: Info, Topic: "listen port", Msg: "no ListenPort: a port the kernel picks at each start; fine only if no peer initiates to this router (a peer that has it as Endpoint needs a fixed port)"}}
	}
	if proto, ok := wellKnownUDP[port]; ok {
		return []Finding{{Level: Warn, Topic: "listen port",
			Msg: fmt.Sprintf("ListenPort %d is %s's port: DPI engines classify (and may block) the tunnel by the port alone", port, proto),
			Fix: "choose another port (any unregistered high port), and tell the peers"}}
	}
	return nil
}

// metricsPort checks MetricsListen can be bound.
func (e Env) metricsPort(cfg *config.Config) []Finding {
	var out []Finding
	if cfg.Interface.MetricsListen != "" {
		m, err := netip.ParseAddrPort(cfg.Interface.MetricsListen)
		if err == nil {
			err = e.ListenTCP(m)
		}
		if err != nil {
			out = append(out, Finding{Level: Error, Topic: "metrics", Msg: fmt.Sprintf("cannot listen on MetricsListen = %s: %v", cfg.Interface.MetricsListen, err),
				Fix: "free the port or change MetricsListen (the router would refuse to start)"})
		} else {
			out = append(out, Finding{Level: OK, Topic: "metrics", Msg: "TCP " + m.String() + " is free for MetricsListen"})
		}
	}
	return out
}

// errPerm marks a bind refused for lack of privilege.
var errPerm = errors.New("permission denied")

func listen(network string, ap netip.AddrPort) error {
	var err error
	switch network {
	case "udp":
		var c net.PacketConn
		if c, err = net.ListenPacket("udp", ap.String()); err == nil {
			return c.Close()
		}
	default:
		var l net.Listener
		if l, err = net.Listen("tcp", ap.String()); err == nil {
			return l.Close()
		}
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %v", errPerm, err)
	}
	return err
}
