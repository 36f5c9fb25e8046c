package lab

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

// Ping sends count ICMP echo requests from side's namespace to dst and
// returns the round-trip times of the replies that came back.
func (l *Lab) Ping(s Side, dst netip.Addr, count int, interval time.Duration) ([]time.Duration, error) {
	network, address := "ip4:icmp", "0.0.0.0"
	var typ icmp.Type = ipv4.ICMPTypeEcho
	proto := 1
	if dst.Is6() {
		network, address, typ, proto = "ip6:ipv6-icmp", "::", ipv6.ICMPTypeEchoRequest, 58
	}
	var c *icmp.PacketConn
	err := netns.Do(l.NS[s], func() error {
		var err error
		c, err = icmp.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id := rand.IntN(0xffff)
	var rtts []time.Duration
	buf := make([]byte, 1500)
	for seq := range count {
		msg := icmp.Message{Type: typ, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("yip-router lab ping")}}
		wb, err := msg.Marshal(nil)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if _, err := c.WriteTo(wb, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return rtts, err
		}
		deadline := start.Add(max(interval, 500*time.Millisecond))
		for {
			_ = c.SetReadDeadline(deadline)
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				break // lost
			}
			m, err := icmp.ParseMessage(proto, buf[:n])
			if err != nil {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq && (m.Type == ipv4.ICMPTypeEchoReply || m.Type == ipv6.ICMPTypeEchoReply) {
				rtts = append(rtts, time.Since(start))
				break
			}
		}
		if rest := interval - time.Since(start); rest > 0 && seq < count-1 {
			time.Sleep(rest)
		}
	}
	return rtts, nil
}

// WaitTunnel pings until a reply comes back (the first packet starts the
// handshake) or timeout passes.
func (l *Lab) WaitTunnel(s Side, dst netip.Addr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if rtts, _ := l.Ping(s, dst, 1, 300*time.Millisecond); len(rtts) == 1 {
			return nil
		}
	}
	return fmt.Errorf("no ping reply from %s within %s", dst, timeout)
}

// TransferResult is what a TCP transfer measured.
type TransferResult struct {
	Bytes    int64
	Duration time.Duration
	Match    bool // SHA-256 of what arrived equals what was sent, per flow
}

// Gbps is the goodput.
func (r TransferResult) Gbps() float64 {
	return float64(r.Bytes) * 8 / r.Duration.Seconds() / 1e9
}

// TCPTransfer sends total bytes of pseudo-random data over flows parallel
// TCP connections from side s to dst (a server it starts in the other
// namespace) and checks each flow's SHA-256 on arrival.
func (l *Lab) TCPTransfer(s Side, dst netip.Addr, total int64, flows int) (TransferResult, error) {
	var ln net.Listener
	err := netns.Do(l.NS[1-s], func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(dst, 5201).String())
		return err
	})
	if err != nil {
		return TransferResult{}, err
	}
	defer ln.Close()
	type got struct {
		sum [32]byte
		n   int64
		err error
	}
	results := make(chan got, flows)
	go func() {
		for range flows {
			c, err := ln.Accept()
			if err != nil {
				results <- got{err: err}
				return
			}
			go func() {
				defer c.Close()
				h := sha256.New()
				n, err := io.Copy(h, c)
				var g got
				copy(g.sum[:], h.Sum(nil))
				g.n, g.err = n, err
				results <- g
			}()
		}
	}()
	per := total / int64(flows)
	var conns []net.Conn
	err = netns.Do(l.NS[s], func() error {
		for range flows {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, 5201).String(), 5*time.Second)
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		return nil
	})
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return TransferResult{}, err
	}
	sent := make([][32]byte, flows)
	var wg sync.WaitGroup
	errs := make(chan error, flows)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			h := sha256.New()
			rng := rand.NewChaCha8([32]byte{byte(i), 1})
			buf := make([]byte, 64<<10)
			for left := per; left > 0; {
				n := int(min(int64(len(buf)), left))
				_, _ = rng.Read(buf[:n])
				h.Write(buf[:n])
				if _, err := c.Write(buf[:n]); err != nil {
					errs <- err
					return
				}
				left -= int64(n)
			}
			copy(sent[i][:], h.Sum(nil))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return TransferResult{}, err
	}
	res := TransferResult{Match: true}
	received := map[[32]byte]int{}
	for range flows {
		select {
		case g := <-results:
			if g.err != nil {
				return res, g.err
			}
			res.Bytes += g.n
			received[g.sum]++
		case <-time.After(60 * time.Second):
			return res, errors.New("TCP transfer: receiver timed out")
		}
	}
	res.Duration = time.Since(start)
	for _, h := range sent {
		if received[h] == 0 {
			res.Match = false
		}
		received[h]--
	}
	return res, nil
}

// StreamResult is what a paced UDP stream measured.
type StreamResult struct {
	Sent, Received, Duplicates int
	Reordered                  int
}

// LossPct is the application-visible loss in percent.
func (r StreamResult) LossPct() float64 {
	if r.Sent == 0 {
		return 0
	}
	return 100 * float64(r.Sent-r.Received) / float64(r.Sent)
}

// UDPStream sends count sequence-numbered datagrams of size bytes from side
// s to dst at pps packets per second and counts what arrives.
func (l *Lab) UDPStream(s Side, dst netip.Addr, pps, count, size int) (StreamResult, error) {
	return l.UDPStreamGSO(s, dst, pps, count, size, 1)
}

// UDPStreamGSO is UDPStream with the sender handing the kernel segs
// datagrams per send (UDP_SEGMENT), as a QUIC stack does: the router's TUN
// then reads them as one USO superpacket.
func (l *Lab) UDPStreamGSO(s Side, dst netip.Addr, pps, count, size, segs int) (StreamResult, error) {
	var rx *net.UDPConn
	err := netns.Do(l.NS[1-s], func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 5202)))
		if err == nil {
			err = rx.SetReadBuffer(8 << 20)
		}
		return err
	})
	if err != nil {
		return StreamResult{}, err
	}
	defer rx.Close()
	var tx *net.UDPConn
	err = netns.Do(l.NS[s], func() error {
		var err error
		tx, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 5202)))
		return err
	})
	if err != nil {
		return StreamResult{}, err
	}
	defer tx.Close()
	seen := make([]bool, count)
	var res StreamResult
	var sending atomic.Bool
	sending.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		last := -1
		for {
			_ = rx.SetReadDeadline(time.Now().Add(time.Second))
			n, err := rx.Read(buf)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) && sending.Load() {
					continue
				}
				return
			}
			if n < 8 {
				continue
			}
			seq := int(binary.BigEndian.Uint64(buf))
			if seq < 0 || seq >= count {
				continue
			}
			if seen[seq] {
				res.Duplicates++
				continue
			}
			seen[seq] = true
			res.Received++
			if seq < last {
				res.Reordered++
			}
			last = max(last, seq)
		}
	}()
	size, segs = max(size, 8), max(segs, 1)
	payload := make([]byte, size*segs)
	var oob []byte
	if segs > 1 {
		oob = make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(oob[unix.CmsgLen(0):], uint16(size))
	}
	interval := time.Second / time.Duration(pps)
	start := time.Now()
	for i := 0; i < count; i += segs {
		k := min(segs, count-i)
		for j := range k {
			binary.BigEndian.PutUint64(payload[j*size:], uint64(i+j))
		}
		var err error
		if k > 1 {
			_, _, err = tx.WriteMsgUDP(payload[:k*size], oob, nil)
		} else {
			_, err = tx.Write(payload[:size])
		}
		if err != nil {
			return res, err
		}
		if wait := time.Until(start.Add(time.Duration(i+k) * interval)); wait > 0 {
			time.Sleep(wait)
		}
	}
	sending.Store(false)
	<-done
	res.Sent = count
	return res, nil
}
