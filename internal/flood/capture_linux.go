package flood

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

// OpenPacket opens an AF_PACKET socket (SOCK_DGRAM: IP packets without
// the link header) on link ifname in namespace ns for protocol: ETH_P_IP
// receives the IP packets arriving, ETH_P_ALL those leaving too.
func OpenPacket(ns, ifname string, protocol uint16) (int, error) {
	return openPacket(ns, ifname, protocol, unix.SOCK_DGRAM)
}

// openPacket is OpenPacket with the socket type: SOCK_DGRAM, or SOCK_RAW
// (the link header too).
func openPacket(ns, ifname string, protocol uint16, typ int) (int, error) {
	fd := -1
	err := netns.Do(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, typ, int(htons(protocol)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(protocol), Ifindex: ifi.Index})
	})
	if err != nil && fd >= 0 {
		unix.Close(fd)
		fd = -1
	}
	return fd, err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// CaptureOptions say what a Capture takes off the receiver's link: the
// IPv4/UDP packets from Src to port Port arriving on Ifname (in
// namespace NS), up to N of them, for at most Timeout.
type CaptureOptions struct {
	NS, Ifname string
	Src        netip.Addr
	Port       uint16
	N          int
	Timeout    time.Duration
	// SplitGSO reads UDP GSO packets (a sender's run of datagrams that
	// crosses a veth as one packet) with their segment size
	// (PACKET_VNET_HDR, which the kernel gives only a SOCK_RAW socket, so
	// each read also has the Ethernet header) and cuts them into the
	// datagrams they stand for (SplitGSO); without it, packets over 1500
	// bytes are skipped.
	SplitGSO bool
}

// Capture is a capture running in a goroutine.
type Capture struct {
	done chan [][]byte
	stop atomic.Bool
}

// vnetHdrLen is the size of struct virtio_net_hdr, which PACKET_VNET_HDR
// puts before each packet: flags (1), gso_type (1), hdr_len (2), gso_size
// (2), csum_start (2), csum_offset (2), in the host's byte order (legacy
// virtio).
const (
	vnetHdrLen       = 10
	vnetGSOUDPL4     = 5 // VIRTIO_NET_HDR_GSO_UDP_L4
	vnetGSOTypeMask  = 0x7f
	ethHdrLen        = 14
	captureReadLimit = 65536 + vnetHdrLen + ethHdrLen
)

// StartCapture starts capturing as o says; Wait returns what it took.
func StartCapture(o CaptureOptions) (*Capture, error) {
	typ := unix.SOCK_DGRAM
	if o.SplitGSO {
		typ = unix.SOCK_RAW
	}
	fd, err := openPacket(o.NS, o.Ifname, unix.ETH_P_IP, typ)
	if err != nil {
		return nil, err
	}
	if o.SplitGSO {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("PACKET_VNET_HDR: %w", err)
		}
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	c := &Capture{done: make(chan [][]byte, 1)}
	go func() {
		defer unix.Close(fd)
		var got [][]byte
		buf := make([]byte, captureReadLimit)
		deadline := time.Now().Add(o.Timeout)
		for len(got) < o.N && time.Now().Before(deadline) && !c.stop.Load() {
			k, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			for _, d := range o.datagrams(buf[:k]) {
				if len(got) < o.N {
					got = append(got, d)
				}
			}
		}
		c.done <- got
	}()
	return c, nil
}

// Stop ends the capture early (Wait still returns what it took).
func (c *Capture) Stop() { c.stop.Store(true) }

// Wait waits for the capture to end and returns the packets it took.
func (c *Capture) Wait() [][]byte { return <-c.done }

// datagrams are the datagrams o takes from one read b (with SplitGSO a
// virtio_net_hdr and the Ethernet header first), copied out of b: none if
// the packet is not IPv4/UDP from o.Src to o.Port, or (not a GSO run)
// over 1500 bytes.
func (o *CaptureOptions) datagrams(b []byte) [][]byte {
	p, gso := b, 0
	if o.SplitGSO {
		if len(b) < vnetHdrLen+ethHdrLen || binary.BigEndian.Uint16(b[vnetHdrLen+12:]) != unix.ETH_P_IP {
			return nil
		}
		if b[1]&vnetGSOTypeMask == vnetGSOUDPL4 {
			gso = int(binary.NativeEndian.Uint16(b[4:]))
		}
		p = b[vnetHdrLen+ethHdrLen:]
	}
	if len(p) < 28 || (gso == 0 && len(p) > 1500) || p[9] != unix.IPPROTO_UDP || [4]byte(p[12:16]) != o.Src.As4() {
		return nil
	}
	ihl := int(p[0]&0x0f) * 4
	if len(p) < ihl+8 || binary.BigEndian.Uint16(p[ihl+2:]) != o.Port {
		return nil
	}
	if gso == 0 {
		return [][]byte{append([]byte(nil), p...)}
	}
	ds := SplitGSO(p, gso)
	for i, d := range ds {
		ds[i] = append([]byte(nil), d...)
	}
	return ds
}
