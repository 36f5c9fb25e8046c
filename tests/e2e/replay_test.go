package e2e

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// A capture of real tunnel traffic, replayed on the wire byte for byte
// (same addresses and ports, so it reaches the lane it came from), is
// refused: nothing is delivered twice and the drops are counted.
func TestReplayedCapture(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// Capture IP packets arriving on B's veth.
	var fd int
	err := netns.Do(l.NS[lab.B], func() error {
		ifi, err := net.InterfaceByName(l.Veth(lab.B))
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	go func() { _, _ = l.UDPStream(lab.A, l.Inner4[lab.B], 1000, 300, 200) }()
	var captured [][]byte
	buf := make([]byte, 2048)
	deadline := time.Now().Add(5 * time.Second)
	for len(captured) < 100 && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n < 28 || buf[9] != unix.IPPROTO_UDP {
			continue
		}
		if binary.BigEndian.Uint16(buf[22:24]) == 51820 { // to the router
			captured = append(captured, append([]byte(nil), buf[:n]...))
		}
	}
	if len(captured) < 50 {
		t.Fatalf("captured only %d tunnel datagrams", len(captured))
	}
	time.Sleep(time.Second) // the stream is over
	before, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	// Replay from A's namespace with a raw socket: the same IP packets.
	err = netns.Do(l.NS[lab.A], func() error {
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
	if err != nil {
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
	if rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 3, 20*time.Millisecond); err != nil || len(rtts) != 3 {
		t.Fatalf("tunnel after the replay: %d/3, %v", len(rtts), err)
	}
}
