package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
)

// TestNATPortRewrite puts A behind a NAT that gives every flow a random
// source port, so the lane ports A offered never arrive as offered: B's
// steering map does not know them and the first datagrams land on
// arbitrary shards. Every lane must carry traffic both ways, and at steady
// state no datagram may take a ring hop on B (the owner steers the lane's
// new port to itself; steering by port, B moves the lane instead).
//
// Both with the eBPF steering and with its fallback (steering by source
// port, as where the kernel refuses eBPF, or an older responder).
func TestNATPortRewrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{{"ebpf", nil}, {"port", []string{"YIP_TEST_STEER_BY_PORT=1"}}} {
		t.Run(tc.name, func(t *testing.T) { natPortRewrite(t, tc.env) })
	}
}

func natPortRewrite(t *testing.T, env []string) {
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, NAT: true, Env: env})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// Warm up: flows on every lane, so B sees each lane's real port.
	if res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 8<<20, 16); err != nil || !res.Match {
		t.Fatalf("warm-up transfer: %+v %v", res, err)
	}
	time.Sleep(200 * time.Millisecond) // counters are published every 50 ms
	before := counter(t, l, lab.B, "foreign_lane")
	res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 32<<20, 16)
	if err != nil || !res.Match {
		t.Fatalf("transfer through the NAT: %+v %v", res, err)
	}
	t.Logf("through the NAT: %.2f Gbit/s", res.Gbps())
	pingAll(t, l, lab.B, l.Inner4[lab.A], 10)
	time.Sleep(200 * time.Millisecond)
	if hops := counter(t, l, lab.B, "foreign_lane") - before; hops != 0 {
		t.Errorf("%d datagrams took a ring hop on B at steady state", hops)
	}
	st, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	ebpf := env == nil
	if want := map[bool]string{true: "by lane remote (eBPF)", false: "by source port"}[ebpf]; !strings.HasPrefix(st.Steering, want) {
		t.Errorf("B steers %q, want %q", st.Steering, want)
	}
	var adopted uint64
	for _, sh := range st.Shards {
		adopted += sh.Counters["lane_adopted"]
	}
	t.Logf("B moved lanes between shards %d times", adopted)
	if ebpf && adopted != 0 {
		// The owner steers the NAT's port to itself: nothing moves.
		t.Errorf("steering by lane remote, B moved lanes %d times", adopted)
	}
	for _, ln := range st.Peers[0].Lanes {
		t.Logf("B lane %d on shard %d ← %s: rx %d, tx %d", ln.Index, ln.Shard, ln.Remote, ln.RxPackets, ln.TxPackets)
		if ln.RxPackets == 0 || ln.TxPackets == 0 {
			t.Errorf("lane %d carried rx %d tx %d packets", ln.Index, ln.RxPackets, ln.TxPackets)
		}
		if ebpf && ln.Shard != ln.Index {
			t.Errorf("steering by lane remote, B's lane %d is on shard %d", ln.Index, ln.Shard)
		}
	}
}
