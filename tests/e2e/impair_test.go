package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
)

// TestImpairWAN runs the tunnel over the impairment bridge: 25 ms each way
// must show as a ~50 ms tunnel RTT; then 5% random loss each way, which
// the bridge must apply to about 5% of the frames it sees (the tunnel's
// own loss, after FEC, is only reported: it depends on timing).
func TestImpairWAN(t *testing.T) {
	wan := impair.Direction{Delay: 25 * time.Millisecond, Seed: 11}
	l := newLab(t, lab.Options{Shards: [2]int{1, 1}, Impair: impair.Both(wan)})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 20, 60*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(rtts) < 18 {
		t.Fatalf("%d of 20 pings answered without loss", len(rtts))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	t.Logf("tunnel RTT over 25 ms each way: min %v median %v max %v", rtts[0], med, rtts[len(rtts)-1])
	if rtts[0] < 49*time.Millisecond || med > 60*time.Millisecond {
		t.Errorf("tunnel RTT min %v median %v, want ≥ 49 ms and ≤ 60 ms", rtts[0], med)
	}

	before := l.ImpairStats()
	wan.Loss = 0.05
	if err := l.SetImpair(impair.Both(wan)); err != nil {
		t.Fatal(err)
	}
	rtts, err = l.Ping(lab.A, l.Inner4[lab.B], 50, 60*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.UDPStream(lab.A, l.Inner4[lab.B], 5000, 10000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	after := l.ImpairStats()
	var seen, lost uint64
	for i := range 2 {
		seen += after[i].Seen - before[i].Seen
		lost += after[i].DropLoss - before[i].DropLoss
		t.Logf("bridge %s: %+v", []string{"A→B", "B→A"}[i], after[i])
	}
	share := float64(lost) / float64(seen)
	t.Logf("5%% loss each way: %d of 50 tunnel pings answered; UDP stream %.2f%% lost (FEC); bridge dropped %d of %d frames (%.2f%%)",
		len(rtts), res.LossPct(), lost, seen, 100*share)
	if seen < 5000 || share < 0.03 || share > 0.07 {
		t.Errorf("bridge dropped %d of %d frames, want 5%% ± 2 points", lost, seen)
	}
	if len(rtts) > 0 {
		if slices.Min(rtts) < 45*time.Millisecond {
			t.Errorf("tunnel RTT %v under the bridge's 50 ms", slices.Min(rtts))
		}
	}
}
