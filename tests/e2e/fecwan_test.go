package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
)

// TestFECWANTargets holds FEC auto to its targets on a long lossy path: a
// UDP stream of 100 Mbit/s (1400-byte inner packets) through the
// impairment bridge at 25 ms each way, after a few seconds in which the
// loss reports tune the ratio, may lose at most 0.01% through 5% random
// loss and 0.1% through 5% loss in bursts of mean length 4 (what the
// hosts' queues and sockets or the bridge itself drop is not the link's
// and is discounted), spending at most 40% in parity; a TCP transfer
// through it arrives intact; and once the path is clean again the parity
// share falls to at most 7% within seconds.
func TestFECWANTargets(t *testing.T) {
	const (
		pps     = 8929 // 100 Mbit/s of 1400-byte packets
		payload = 1400 - 28
	)
	clean := impair.Direction{Delay: 25 * time.Millisecond, Seed: 31}
	burst := impair.BurstLoss(1, 4, 0.05)
	for _, tc := range []struct {
		name    string
		lossy   impair.Direction
		maxLoss float64 // percent
		secs    int     // measured
	}{
		{"random", impair.Direction{Delay: 25 * time.Millisecond, Loss: 0.05, Seed: 32}, 0.01, 10},
		// Bursts make the loss that survives FEC come in rare lumps: a
		// longer window measures the rate, not the luck of ten seconds.
		{"bursty", impair.Direction{Delay: 25 * time.Millisecond, Burst: &burst, Seed: 33}, 0.1, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, lab.Options{Shards: [2]int{1, 1}, Impair: impair.Both(clean)})
			if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := l.SetImpair(impair.Both(tc.lossy)); err != nil {
				t.Fatal(err)
			}
			// The adapter acts on loss reports, about one a second.
			if _, err := l.UDPStream(lab.A, l.Inner4[lab.B], pps, 5*pps, payload); err != nil {
				t.Fatal(err)
			}
			m := startFECWindow(t, l)
			res, err := l.UDPStream(lab.A, l.Inner4[lab.B], pps, tc.secs*pps, payload)
			if err != nil {
				t.Fatal(err)
			}
			w := m.end(t)
			t.Logf("A's FEC: %s", laneFEC(t, l, lab.A))
			lost := res.Sent - res.Received - min(w.hostDrops, res.Sent-res.Received)
			pct := 100 * float64(lost) / float64(res.Sent)
			t.Logf("%s 5%%: %d of %d arrived, %d dropped by hosts or bridge queues; lost %.4f%%; parity %.1f%% of data; bridge dropped %.2f%% of frames; %d recovered",
				tc.name, res.Received, res.Sent, w.hostDrops, pct, 100*w.parityShare(), 100*w.linkLoss(), w.recovered)
			if pct > tc.maxLoss {
				t.Errorf("application-visible loss %.4f%%, want ≤ %g%%", pct, tc.maxLoss)
			}
			if s := w.parityShare(); s > 0.40 {
				t.Errorf("parity %.1f%% of data datagrams, want ≤ 40%%", 100*s)
			}
			if ll := w.linkLoss(); ll < 0.03 || ll > 0.07 {
				t.Errorf("the bridge dropped %.2f%% of frames, want 5%% ± 2 points", 100*ll)
			}
			if tr, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 4<<20, 1); err != nil || !tr.Match {
				t.Fatalf("TCP transfer through the lossy path: %+v %v", tr, err)
			}

			// Clean again: the reports say so, and parity falls back.
			if err := l.SetImpair(impair.Both(clean)); err != nil {
				t.Fatal(err)
			}
			if _, err := l.UDPStream(lab.A, l.Inner4[lab.B], pps, 4*pps, payload); err != nil {
				t.Fatal(err)
			}
			m = startFECWindow(t, l)
			if _, err := l.UDPStream(lab.A, l.Inner4[lab.B], pps, 3*pps, payload); err != nil {
				t.Fatal(err)
			}
			w = m.end(t)
			t.Logf("clean again: parity %.1f%% of data", 100*w.parityShare())
			if s := w.parityShare(); s > 0.07 {
				t.Errorf("parity on the clean path %.1f%% of data datagrams, want ≤ 7%%", 100*s)
			}
		})
	}
}

// fecWindow is what A sent and what was lost or dropped between
// startFECWindow and end.
type fecWindow struct {
	parity, out        uint64 // A's parity and all datagrams out
	recovered          uint64 // B's data symbols recovered
	hostDrops          int
	bridgeSeen, lossed uint64
}

type fecMark struct {
	l      *lab.Lab
	parity uint64
	out    uint64
	rec    uint64
	drops  int
	bridge [2]impair.Stats
}

func startFECWindow(t *testing.T, l *lab.Lab) fecMark {
	return fecMark{l: l, parity: counter(t, l, lab.A, "parity_out"), out: counter(t, l, lab.A, "udp_out"),
		rec: counter(t, l, lab.B, "fec_recovered"), drops: hostDrops(t, l) + bridgeQueueDrops(l.ImpairStats()), bridge: l.ImpairStats()}
}

func (m fecMark) end(t *testing.T) fecWindow {
	l := m.l
	br := l.ImpairStats()
	ab, before := br[0], m.bridge[0]
	return fecWindow{
		parity:     counter(t, l, lab.A, "parity_out") - m.parity,
		out:        counter(t, l, lab.A, "udp_out") - m.out,
		recovered:  counter(t, l, lab.B, "fec_recovered") - m.rec,
		hostDrops:  hostDrops(t, l) + bridgeQueueDrops(br) - m.drops,
		bridgeSeen: ab.Seen - before.Seen,
		lossed:     ab.DropLoss + ab.DropBurst - before.DropLoss - before.DropBurst,
	}
}

// bridgeQueueDrops is what the bridge dropped for want of room or a
// failed send, not by its loss model.
func bridgeQueueDrops(st [2]impair.Stats) int {
	n := 0
	for _, s := range st {
		n += int(s.DropFull + s.DropSend + s.DropRate + s.DropBig)
	}
	return n
}

// parityShare is A's parity per other datagram it sent.
func (w fecWindow) parityShare() float64 {
	if w.out <= w.parity {
		return 0
	}
	return float64(w.parity) / float64(w.out-w.parity)
}

// linkLoss is the share of A→B frames the bridge's loss model dropped.
func (w fecWindow) linkLoss() float64 {
	if w.bridgeSeen == 0 {
		return 0
	}
	return float64(w.lossed) / float64(w.bridgeSeen)
}

// laneFEC is the FEC ratio of side's lanes, as show has it.
func laneFEC(t *testing.T, l *lab.Lab, s lab.Side) string {
	t.Helper()
	st, err := l.Status(s)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range st.Peers {
		for _, ln := range p.Lanes {
			out = append(out, ln.FEC)
		}
	}
	return strings.Join(out, ", ")
}
