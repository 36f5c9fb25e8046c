package hostcheck

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/cpuplan"
	"github.com/yip-router/yip-router/internal/fulltunnel"
	"github.com/yip-router/yip-router/shard/tun"
	"github.com/yip-router/yip-router/shard/udp"
)

// Real is this machine.
func Real() Env {
	return Env{
		Proc: "/proc", Sys: "/sys", Dev: "/dev",
		Root:           os.Geteuid() == 0 || hasNetAdmin(),
		NoBPF:          !hasCap(unix.CAP_BPF) && !hasCap(unix.CAP_SYS_ADMIN),
		Tune:           tuneCmd(),
		AffinityCPUs:   cpuplan.AffinityCPUs,
		OpenTUN:        openTUN,
		RouteTo:        routeTo,
		FullTunnelMark: fulltunnel.ChooseMark,
		Offloads:       offloads,
		ProbeOffloads:  probeOffloads,
		SocketBuffers:  socketBuffers,
		ListenUDP:      func(ap netip.AddrPort) error { return listen("udp", ap) },
		ListenTCP:      func(ap netip.AddrPort) error { return listen("tcp", ap) },
	}
}

// hasNetAdmin reports whether this process holds CAP_NET_ADMIN in its
// effective set (a non-root user the systemd unit grants it to).
func hasNetAdmin() bool { return hasCap(unix.CAP_NET_ADMIN) }

// hasCap reports whether this process holds capability c in its effective
// set.
func hasCap(c int) bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[c/32].Effective&(1<<(uint(c)%32)) != 0
}

// tuneCmd is how fixes name yip-tune: by name where it is on PATH (an
// installed router), else by its path in the source tree.
func tuneCmd() string {
	if _, err := exec.LookPath("yip-tune"); err == nil {
		return "yip-tune"
	}
	return "tuning/yip-tune"
}

// probeOffloads opens a TUN device and a loopback UDP socket asking for
// every offload, as yip-router up does, and reports what was granted.
// Coalesced TUN writes need only the virtio-net header.
func probeOffloads() (config.OffloadSet, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	d, err := tun.Open("yipchk"+hex.EncodeToString(b[:]), 1, tun.Offloads{VnetHdr: true, TSO: true, USO: true})
	if err != nil {
		return config.OffloadSet{}, err
	}
	defer d.Close()
	got := config.OffloadSet{TSO: d.Offloads.TSO, USO: d.Offloads.USO, GRO: d.Offloads.VnetHdr}
	g, err := udp.ListenGroup(netip.MustParseAddrPort("127.0.0.1:0"), 1)
	if err != nil {
		return got, err
	}
	defer g[0].Close()
	got.UDPGSO, got.UDPGRO = g[0].EnableOffloads(true, true)
	return got, nil
}

// socketBuffers opens a loopback UDP socket as the router opens its own
// and reports whether it got the buffers it asked for.
func socketBuffers() (bool, error) {
	c, err := udp.ListenLane(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		return false, err
	}
	defer c.Close()
	_, _, short := c.Buffers()
	return short, nil
}

// openTUN creates a TUN device with a random name and the given queues, and
// closes it (the kernel removes it with its last queue).
func openTUN(queues int) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	d, err := tun.Open("yipchk"+hex.EncodeToString(b[:]), queues, tun.Offloads{})
	if err != nil {
		return err
	}
	return d.Close()
}

// routeTo asks the kernel which interface it would send to dst through,
// with mark (like `ip route get DST mark M`; nothing is sent).
func routeTo(dst netip.Addr, mark uint32) (string, error) {
	routes, err := netlink.RouteGetWithOptions(dst.AsSlice(), &netlink.RouteGetOptions{Mark: mark})
	if err != nil {
		return "", err
	}
	if len(routes) == 0 || routes[0].LinkIndex == 0 {
		return "", fmt.Errorf("no route")
	}
	link, err := netlink.LinkByIndex(routes[0].LinkIndex)
	if err != nil {
		return "", err
	}
	return link.Attrs().Name, nil
}

// ethtoolValue is struct ethtool_value.
type ethtoolValue struct {
	cmd, data uint32
}

// ifreqData is struct ifreq with ifr_data.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data uintptr
	_    [16]byte
}

// offloads reads GRO (ETHTOOL_GGRO) and LRO (ETH_FLAG_LRO of
// ETHTOOL_GFLAGS) with the ethtool ioctl, so no ethtool binary is needed.
func offloads(ifname string) (gro, lro bool, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, false, err
	}
	defer unix.Close(fd)
	get := func(cmd uint32) (uint32, error) {
		v := ethtoolValue{cmd: cmd}
		var ifr ifreqData
		copy(ifr.name[:len(ifr.name)-1], ifname)
		ifr.data = uintptr(unsafe.Pointer(&v))
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		if e != 0 {
			return 0, fmt.Errorf("ethtool ioctl on %s: %w", ifname, e)
		}
		return v.data, nil
	}
	g, err := get(unix.ETHTOOL_GGRO)
	if err != nil {
		return false, false, err
	}
	const ethFlagLRO = 1 << 15
	f, err := get(unix.ETHTOOL_GFLAGS)
	if err != nil {
		return g != 0, false, nil // LRO unknown: assume off
	}
	return g != 0, f&ethFlagLRO != 0, nil
}
