// The checks of the machine itself: privileges, the socket buffer maxima,
// TUN multiqueue support for the shard count up would run with, and the
// CPUs and SMT layout the shards would be placed on.

package hostcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/cpuplan"
	"github.com/yip-router/yip-router/shard/udp"
)

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
	for _, m := range []struct {
		k    string
		want int64
	}{{"rmem_max", udp.RecvBuffer}, {"wmem_max", udp.SendBuffer}} {
		k, want := m.k, m.want
		p := filepath.Join(e.Proc, "sys/net/core", k)
		v, err := e.readInt(p)
		switch {
		case err != nil:
			out = append(out, Finding{Level: Info, Topic: "socket buffers", Msg: fmt.Sprintf("cannot read %s: %v", p, err)})
		case v >= want:
			out = append(out, Finding{Level: OK, Topic: "socket buffers", Msg: fmt.Sprintf("%s %d >= %d", k, v, want)})
		case forced:
			out = append(out, Finding{Level: Info, Topic: "socket buffers",
				Msg: fmt.Sprintf("%s %d < %d: yip-router forces its %d MiB per socket past it (CAP_NET_ADMIN); other UDP services are capped at it", k, v, want, want>>20),
				Fix: fmt.Sprintf("run: %s apply (or: sysctl -w net.core.%s=%d)", e.Tune, k, want)})
		default:
			out = append(out, Finding{Level: Warn, Topic: "socket buffers",
				Msg: fmt.Sprintf("%s %d < %d: this process cannot force a socket's %d MiB past it (no CAP_NET_ADMIN in the host's user namespace, e.g. an unprivileged container), so neither can yip-router run like it: the kernel gives each socket %d and bursts will be dropped", k, v, want, want>>20, v),
				Fix: fmt.Sprintf("on the host, run: %s apply (or: sysctl -w net.core.%s=%d)", e.Tune, k, want)})
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
