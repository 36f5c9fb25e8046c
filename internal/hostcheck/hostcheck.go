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
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/config"
)

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
