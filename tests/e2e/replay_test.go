package e2e

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// pinnedFlow sends count datagrams at pps from A's inner address, port
// 5301, to B's, port 5302, and returns how many arrived. One fixed 5-tuple
// hashes to one TUN queue on A, so every call travels on the same lane.
func pinnedFlow(l *lab.Lab, pps, count int) (int, error) {
	var rx, tx *net.UDPConn
	err := netns.Do(l.NS[lab.B], func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Inner4[lab.B], 5302)))
		if err == nil {
			err = rx.SetReadBuffer(8 << 20)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	defer rx.Close()
	err = netns.Do(l.NS[lab.A], func() error {
		var err error
		tx, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Inner4[lab.A], 5301)),
			net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Inner4[lab.B], 5302)))
		return err
	})
	if err != nil {
		return 0, err
	}
	defer tx.Close()
	var sending atomic.Bool
	sending.Store(true)
	got := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := rx.Read(buf); err != nil {
				if sending.Load() {
					continue
				}
				break
			}
			n++
		}
		got <- n
	}()
	payload := make([]byte, 200)
	start := time.Now()
	for i := range count {
		if _, err := tx.Write(payload); err != nil {
			sending.Store(false)
			<-got
			return 0, err
		}
		if wait := time.Until(start.Add(time.Duration(i+1) * time.Second / time.Duration(pps))); wait > 0 {
			time.Sleep(wait)
		}
	}
	sending.Store(false)
	return <-got, nil
}

// replay sends captured IP packets again from A's namespace with a raw
// socket: the same addresses and ports, so each reaches the lane it came
// from.
func replay(l *lab.Lab, captured [][]byte) error {
	return netns.Do(l.NS[lab.A], func() error {
		rfd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer unix.Close(rfd)
		for _, p := range captured {
			// veth leaves the UDP checksum partial (offloaded); IPv4 lets
			// us send none instead. Every other byte is as captured.
			ihl := int(p[0]&0x0f) * 4
			p[ihl+6], p[ihl+7] = 0, 0
			dst := &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}
			if err := unix.Sendto(rfd, p, 0, dst); err != nil {
				return err
			}
		}
		return nil
	})
}

// A capture of real tunnel traffic, replayed on the wire byte for byte
// (same addresses and ports, so it reaches the lane it came from), is
// refused: nothing is delivered twice and the drops are counted. Then the
// attack that used to silence a lane: after the lane has been quiet for
// longer than the FEC window's 250 ms resynchronisation delay, the oldest
// captured datagrams are re-sent every 200 ms while legitimate traffic
// runs on the same lane; that traffic must still arrive.
func TestReplayedCapture(t *testing.T) {
	// A sends without UDP GSO: over a veth a GSO run is one packet, and
	// what an attacker on a real wire captures is datagrams.
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, Extra: [2]string{"DisableOffload = udp-gso", ""}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// Capture IP packets arriving on B's veth.
	fd := captureVeth(t, l, lab.B, unix.ETH_P_IP)
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	streamDone := make(chan struct{})
	go func() { _, _ = pinnedFlow(l, 1000, 300); close(streamDone) }()
	var captured [][]byte
	buf := make([]byte, 2048)
	deadline := time.Now().Add(5 * time.Second)
	for len(captured) < 100 && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n < 28 || n > 1500 || buf[9] != unix.IPPROTO_UDP {
			continue
		}
		if binary.BigEndian.Uint16(buf[22:24]) == lab.Port { // to the router
			captured = append(captured, append([]byte(nil), buf[:n]...))
		}
	}
	if len(captured) < 50 {
		t.Fatalf("captured only %d tunnel datagrams", len(captured))
	}
	<-streamDone
	time.Sleep(time.Second) // the stream is over
	before, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	// Replay from A's namespace with a raw socket: the same IP packets.
	if err := replay(l, captured); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	after, err := l.Status(lab.B)
	if err != nil {
		t.Fatalf("router B gone after the replay: %v", err)
	}
	var in, out, refused uint64
	for i := range after.Shards {
		a, b := after.Shards[i].Counters, before.Shards[i].Counters
		in += a["udp_in"] - b["udp_in"]
		out += a["tun_out"] - b["tun_out"]
		for k, v := range a {
			if v != b[k] {
				t.Logf("shard %d %s +%d", i, k, v-b[k])
			}
		}
		for _, k := range []string{"drop_duplicate", "drop_replay", "drop_fec_window", "drop_bad_tag", "drop_unknown_lane", "drop_decrypt"} {
			refused += a[k] - b[k]
		}
	}
	t.Logf("replayed %d datagrams: %d received, %d delivered, %d refused", len(captured), in, out, refused)
	if in < uint64(len(captured)) {
		t.Fatalf("the replay did not reach the router (%d of %d)", in, len(captured))
	}
	if out != 0 {
		t.Fatalf("%d replayed packets were delivered", out)
	}
	// Data and control replays are refused by the FEC window or the
	// replay window and counted; a replayed parity symbol can be absorbed
	// by the FEC window as the start of a group that never completes,
	// which delivers nothing.
	if refused < uint64(len(captured))/2 {
		t.Errorf("only %d of %d replays counted as drops", refused, len(captured))
	}

	// Move the lane well past the captured groups (a 5 ms FEC flush at
	// 1000 packets/s closes a group every few packets: hundreds of groups,
	// far more than the decoder's 32-group window).
	const pps, count = 1000, 1000
	if got, err := pinnedFlow(l, pps, count); err != nil || got < count*9/10 {
		t.Fatalf("flow after the replay: %d of %d arrived, %v", got, count, err)
	}
	time.Sleep(400 * time.Millisecond) // the lane's decoder sees nothing
	stop := make(chan struct{})
	attack := make(chan error, 1)
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if err := replay(l, captured[:8]); err != nil {
				attack <- err
				return
			}
			select {
			case <-stop:
				attack <- nil
				return
			case <-tick.C:
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	got, err := pinnedFlow(l, pps, count)
	close(stop)
	if aerr := <-attack; aerr != nil {
		t.Fatal(aerr)
	}
	if err != nil || got < count*9/10 {
		t.Fatalf("flow while old datagrams were replayed every 200 ms after silence: %d of %d arrived, %v", got, count, err)
	}
	t.Logf("flow while old datagrams were replayed every 200 ms after silence: %d of %d arrived", got, count)
	if rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 3, 20*time.Millisecond); err != nil || len(rtts) != 3 {
		t.Fatalf("tunnel after the replay: %d/3, %v", len(rtts), err)
	}
}

// captureVeth opens an AF_PACKET socket on side's veth (in its
// namespace) for protocol: ETH_P_IP receives the IP packets arriving,
// ETH_P_ALL those leaving too (flood.OpenPacket).
func captureVeth(t *testing.T, l *lab.Lab, side lab.Side, protocol uint16) int {
	t.Helper()
	fd, err := flood.OpenPacket(l.NS[side], l.Veth(side), protocol)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}
