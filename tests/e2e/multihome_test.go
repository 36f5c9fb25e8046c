package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// TestMultiHomedResponder gives B a second address on its link and A B's
// second address as Endpoint, with A behind a stateful firewall that
// takes only what answers a flow A opened (conntrack ESTABLISHED). B
// listens on every address; the routing table would answer A from B's
// first address, which A's firewall drops. B must answer the handshake
// and send its data from the address A asked: the tunnel comes up,
// carries traffic both ways, and A sees B at the asked address.
func TestMultiHomedResponder(t *testing.T) {
	second := netip.MustParseAddr("172.31.250.3")
	l := newLabWith(t, lab.Options{Shards: [2]int{2, 2}}, func(l *lab.Lab) error {
		if err := netns.IP("-n", l.NS[lab.B], "addr", "add", second.String()+"/24", "dev", l.Veth(lab.B)); err != nil {
			return err
		}
		for _, rule := range [][]string{
			{"-A", "INPUT", "-i", l.Veth(lab.A), "-p", "udp", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"},
			{"-A", "INPUT", "-i", l.Veth(lab.A), "-p", "udp", "-j", "DROP"},
		} {
			argv := append([]string{"netns", "exec", l.NS[lab.A], "iptables"}, rule...)
			if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
				return fmt.Errorf("iptables %s: %v: %s", strings.Join(rule, " "), err, out)
			}
		}
		l.Underlay[lab.B] = second // A's Endpoint
		return l.WriteConfig(lab.A, "")
	})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 4<<20, 4)
	if err != nil || !res.Match {
		t.Fatalf("transfer: %+v %v", res, err)
	}
	// B's bulk data: runs of full datagrams (UDP GSO) from the asked
	// address.
	if res, err = l.TCPTransfer(lab.B, l.Inner4[lab.A], 4<<20, 4); err != nil || !res.Match {
		t.Fatalf("transfer from B: %+v %v", res, err)
	}
	pingAll(t, l, lab.B, l.Inner4[lab.A], 10)
	st, err := l.Status(lab.A)
	if err != nil {
		t.Fatal(err)
	}
	// Every lane heard B (data, or its hellos, keepalives and loss
	// reports: LastRx; which lane carries a flow's data is the flow
	// hash's choice, and all of B's data may take one lane) at the asked
	// address, through A's firewall.
	for _, ln := range st.Peers[0].Lanes {
		if ap, err := netip.ParseAddrPort(ln.Remote); err != nil || ap.Addr() != second || ln.LastRx.IsZero() {
			t.Errorf("A's lane %d talks to %s (last heard %v), want B's asked address %s", ln.Index, ln.Remote, ln.LastRx, second)
		}
	}
	if st.Peers[0].RxPackets == 0 {
		t.Error("A received no data from B")
	}
	if st, err = l.Status(lab.B); err != nil {
		t.Fatal(err)
	}
	for _, ln := range st.Peers[0].Lanes {
		if ln.Local != second.String() {
			t.Errorf("B's lane %d sends from %q, want %s", ln.Index, ln.Local, second)
		}
	}
	out, _ := exec.Command("ip", "netns", "exec", l.NS[lab.A], "iptables", "-nvL", "INPUT").CombinedOutput()
	t.Logf("A's firewall:\n%s", out)
}
