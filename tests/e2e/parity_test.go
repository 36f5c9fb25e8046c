package e2e

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
)

// TestCleanPathParity: on a clean path, once the peer's loss reports have
// shown no loss for a few seconds, a lane sends no parity: not for a ping
// lane, not for a bulk TCP flow, not for its ACK stream. Parity must stay
// at or under 1% of the datagrams each side sends (the target;
// this path gives 0).
func TestCleanPathParity(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{1, 1}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// Long enough for cleanReports reports in a row on both sides.
	if _, err := l.Ping(lab.A, l.Inner4[lab.B], 50, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// drops: what the receiving kernel dropped (socket buffers full): on
	// a busy machine that is loss the adapter rightly answers with parity,
	// so a window with drops is not a clean path and is only logged.
	type mark struct{ parity, out, drops [2]uint64 }
	take := func() (m mark) {
		time.Sleep(150 * time.Millisecond) // counters are published every 50 ms
		for s := range 2 {
			m.parity[s] = counter(t, l, lab.Side(s), "parity_out")
			m.out[s] = counter(t, l, lab.Side(s), "udp_out")
			m.drops[s] = snmp(t, l, lab.Side(s), "Udp", "RcvbufErrors") + snmp6(t, l, lab.Side(s), "Udp6RcvbufErrors")
		}
		return m
	}
	check := func(what string, a, b mark) {
		t.Helper()
		for s := range 2 {
			p, out := b.parity[s]-a.parity[s], b.out[s]-a.out[s]
			drops := b.drops[1-s] - a.drops[1-s]
			t.Logf("%s: %c sent %d datagrams, %d parity; the peer's kernel dropped %d", what, 'A'+s, out, p, drops)
			if out == 0 {
				t.Fatalf("%s: %c sent nothing", what, 'A'+s)
			}
			if drops == 0 && float64(p) > 0.01*float64(out) {
				t.Errorf("%s: %c sent %d parity in %d datagrams, want ≤ 1%%", what, 'A'+s, p, out)
			}
		}
	}
	m0 := take()
	rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 100, 20*time.Millisecond)
	if err != nil || len(rtts) != 100 {
		t.Fatalf("pings: %d of 100 answered, %v", len(rtts), err)
	}
	m1 := take()
	check("100 pings", m0, m1)
	// A bulk flow: its data lane and the ACK lane back (their first
	// reports may still carry the start guess: warm up first).
	if res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 64<<20, 1); err != nil || !res.Match {
		t.Fatalf("warm-up transfer: %+v %v", res, err)
	}
	m2 := take()
	if res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 256<<20, 1); err != nil || !res.Match {
		t.Fatalf("transfer: %+v %v", res, err)
	}
	check("TCP transfer", m2, take())
}
