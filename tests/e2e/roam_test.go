package e2e

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
)

// TestRoaming renumbers each gateway's underlay address in turn (the new
// address added, the old one removed, as after a DHCP renumbering or an LTE
// failover) and checks that the tunnel follows at once: the other side moves
// its lanes on the first authenticated datagram from the new address, with
// no handshake, and nothing sent after the tunnel came back is lost.
func TestRoaming(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	before, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	hsBefore := before.Handshakes.Completed + before.Handshakes.Answered

	// The initiator moves; it sends first, so the responder must follow.
	roamAndCheck(t, l, lab.A, netip.MustParseAddr("172.31.250.11"), "initiator")
	// The responder moves; the initiator's configured Endpoint is now
	// stale, and only the responder's data can tell it where B went.
	roamAndCheck(t, l, lab.B, netip.MustParseAddr("172.31.250.12"), "responder")

	after, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	if hs := after.Handshakes.Completed + after.Handshakes.Answered; hs != hsBefore {
		t.Errorf("B's handshakes went from %d to %d: roaming must not need one", hsBefore, hs)
	}
}

// roamAndCheck moves side's underlay address to to, then checks that the
// tunnel is back within a second of the side's first ping (no handshake),
// loses nothing after, and that the other side sees side at to.
func roamAndCheck(t *testing.T, l *lab.Lab, side lab.Side, to netip.Addr, who string) {
	t.Helper()
	other := 1 - side
	moveUnderlay(t, l, side, to)
	recovered := waitPings(t, l, side, l.Inner4[other], 10*time.Second)
	t.Logf("%s moved: tunnel back after %s", who, recovered.Round(time.Millisecond))
	if recovered > time.Second {
		t.Errorf("tunnel back %s after the %s moved; want within 1 s (no handshake)", recovered, who)
	}
	pingAll(t, l, side, l.Inner4[other], 20)
	pingAll(t, l, other, l.Inner4[side], 20)
	checkEndpoint(t, l, other, to.String(), true)
}

// moveUnderlay gives side's veth the address to and removes its old one
// (the kernel keeps the subnet route through the promoted address).
func moveUnderlay(t *testing.T, l *lab.Lab, s lab.Side, to netip.Addr) {
	t.Helper()
	veth := l.Veth(s)
	old := l.Underlay[s]
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.conf." + veth + ".promote_secondaries=1"},
		{"ip", "addr", "add", to.String() + "/24", "dev", veth},
		{"ip", "addr", "del", old.String() + "/24", "dev", veth},
	} {
		if out, err := l.Exec(s, args[0], args[1:]...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	l.Underlay[s] = to
}

// waitPings pings dst from side until a reply comes and returns how long
// that took.
func waitPings(t *testing.T, l *lab.Lab, s lab.Side, dst netip.Addr, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if rtts, _ := l.Ping(s, dst, 1, 100*time.Millisecond); len(rtts) == 1 {
			return time.Since(start)
		}
	}
	t.Fatalf("no ping reply from %s within %s of the move", dst, timeout)
	return 0
}

// pingAll sends n pings 20 ms apart and fails on any loss.
func pingAll(t *testing.T, l *lab.Lab, s lab.Side, dst netip.Addr, n int) {
	t.Helper()
	rtts, err := l.Ping(s, dst, n, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rtts) != n {
		t.Errorf("%d of %d pings to %s answered after the tunnel came back", len(rtts), n, dst)
	}
}

// checkEndpoint checks that side sees its peer at addr, on every lane, and
// (if moved) counts the move.
func checkEndpoint(t *testing.T, l *lab.Lab, s lab.Side, addr string, moved bool) {
	t.Helper()
	st, err := l.Status(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 {
		t.Fatalf("%d peers in status", len(st.Peers))
	}
	p := st.Peers[0]
	if ep, err := netip.ParseAddrPort(p.Endpoint); err != nil || ep.Addr().String() != addr {
		t.Errorf("peer endpoint %s, want %s", p.Endpoint, addr)
	}
	for _, ln := range p.Lanes {
		if ep, err := netip.ParseAddrPort(ln.Remote); err != nil || ep.Addr().String() != addr {
			t.Errorf("lane %d remote %s, want %s", ln.Index, ln.Remote, addr)
		}
	}
	if moved && p.EndpointMoves == 0 {
		t.Errorf("peer shows no endpoint moves")
	}
}

// TestDualStack: routers listening on both families (the default) build
// the tunnel over IPv6; then A loses its IPv6 uplink (its address goes) and
// its operator points it at B's IPv4 address (SIGHUP): B follows A's first
// datagram from IPv4, with no handshake — a peer roams between families.
// (While the old path still works, the latest authenticated datagram
// decides, as in WireGuard, so the old address is removed first.)
func TestDualStack(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, Endpoint6: true})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	pingAll(t, l, lab.B, l.Inner6[lab.A], 5)
	checkEndpoint(t, l, lab.B, l.Underlay6[lab.A].String(), false)
	checkEndpoint(t, l, lab.A, l.Underlay6[lab.B].String(), false)
	before, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}

	if out, err := l.Exec(lab.A, "ip", "addr", "del", l.Underlay6[lab.A].String()+"/64", "dev", l.Veth(lab.A)); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := l.SetEndpoint6(false); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(lab.A, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	recovered := waitPings(t, l, lab.A, l.Inner4[lab.B], 10*time.Second)
	t.Logf("IPv6 to IPv4: tunnel back after %s", recovered.Round(time.Millisecond))
	pingAll(t, l, lab.A, l.Inner4[lab.B], 20)
	pingAll(t, l, lab.B, l.Inner4[lab.A], 20)
	checkEndpoint(t, l, lab.B, l.Underlay[lab.A].String(), true)
	checkEndpoint(t, l, lab.A, l.Underlay[lab.B].String(), false)
	after, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := after.Handshakes, before.Handshakes; a.Completed+a.Answered != b.Completed+b.Answered {
		t.Errorf("B's handshakes went from %d to %d: the family change must not need one", b.Completed+b.Answered, a.Completed+a.Answered)
	}
}
