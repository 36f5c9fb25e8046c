package flood

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

// Options place an attacker next to a receiver.
type Options struct {
	NS         string         // the attacker's namespace (Attach creates it)
	Target     string         // the receiver's namespace
	VethTarget string         // the name of the veth end in Target
	VethSelf   string         // the name of the end in NS
	Receiver   netip.AddrPort // the receiver's underlay address and listen port
}

// The attacker's link: TargetAddr on the receiver's end, SelfAddr on its
// own (a /24 of their own).
var (
	TargetAddr = netip.MustParseAddr("172.31.251.1")
	SelfAddr   = netip.MustParseAddr("172.31.251.2")
)

// Attacker is a namespace with a veth into the receiver's namespace, a
// route from the receiver back to SpoofNet, reverse-path filtering off in
// the receiver's namespace, and a raw socket.
type Attacker struct {
	ns     string
	fd     int
	target netip.AddrPort
	// port is the UDP destination port Send writes into every packet:
	// the receiver's listen port, or ClosedPort for the CPU-matched
	// baseline.
	port atomic.Uint32
}

// Attach builds the attacker of o; Close removes it.
func Attach(o Options) (_ *Attacker, err error) {
	at := &Attacker{ns: o.NS, fd: -1, target: o.Receiver}
	at.port.Store(uint32(o.Receiver.Port()))
	if err := netns.Add(o.NS); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			at.Close()
		}
	}()
	if err := netns.Veth(o.Target, o.VethTarget, TargetAddr.String()+"/24", o.NS, o.VethSelf, SelfAddr.String()+"/24"); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"-n", o.NS, "route", "add", netip.PrefixFrom(o.Receiver.Addr(), 24).Masked().String(), "via", TargetAddr.String()},
		{"-n", o.Target, "route", "add", SpoofNet, "via", SelfAddr.String()},
	}
	for _, s := range steps {
		if err := netns.IP(s...); err != nil {
			return nil, err
		}
	}
	for _, k := range []string{"all", "default", o.VethTarget} {
		if out, err := exec.Command("ip", "netns", "exec", o.Target, "sysctl", "-qw", "net.ipv4.conf."+k+".rp_filter=0").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("rp_filter in %s: %v: %s", o.Target, err, out)
		}
	}
	err = netns.Do(o.NS, func() error {
		var err error
		at.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		return nil, err
	}
	return at, nil
}

// Self is the attacker's own address.
func (at *Attacker) Self() netip.Addr { return SelfAddr }

// Target is the receiver's underlay address and listen port.
func (at *Attacker) Target() netip.AddrPort { return at.target }

// SetPort sets the UDP destination port of every packet a Send started
// after it writes: the receiver's listen port (Target().Port()), or
// ClosedPort for the CPU-matched baseline.
func (at *Attacker) SetPort(port uint16) { at.port.Store(uint32(port)) }

// Send sends pkts (IPv4 packets, as this package builds them) round and
// round from the calling goroutine until stop, and returns how many the
// kernel took: as fast as it can with pps ≤ 0, else at most pps a second
// (sleeping between batches of 64), so a CPU-matched baseline can send
// the same flood at the rate the flood itself reached. Each goes to the
// port SetPort set, written into every packet in both modes so the
// generator's cost is the same. With no packets it sends nothing and
// returns at once.
func (at *Attacker) Send(stop *atomic.Bool, pkts [][]byte, pps float64) uint64 {
	var n uint64
	if len(pkts) == 0 {
		return 0
	}
	port := uint16(at.port.Load())
	start := time.Now()
	for i := 0; ; i++ {
		if i%64 == 0 {
			if stop.Load() {
				return n
			}
			if pps > 0 {
				// Ahead of the rate: wait until the packets sent are due.
				if ahead := time.Duration(float64(i)/pps*float64(time.Second)) - time.Since(start); ahead > 0 {
					time.Sleep(ahead)
				}
			}
		}
		p := pkts[i%len(pkts)]
		binary.BigEndian.PutUint16(p[int(p[0]&0x0f)*4+2:], port)
		if unix.Sendto(at.fd, p, 0, &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}) == nil {
			n++
		}
	}
}

// Close closes the socket and removes the attacker's namespace (its veth
// with it).
func (at *Attacker) Close() {
	if at.fd >= 0 {
		unix.Close(at.fd)
		at.fd = -1
	}
	_ = netns.Del(at.ns)
}
