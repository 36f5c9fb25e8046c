package shard

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A lane sends groups beyond fec.LegacyMaxK:LegacyMaxR only while its peer's
// keepalives announce FeatureLongGroups: the adapter may choose 192 data
// symbols then, and a keepalive without the bit (or an older router's,
// without features) cuts the encoder back at once. What it sends then
// arrives whole through 5% loss.
func TestLongGroupsByPeerFeatures(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa, sb := a.shards[0], b.shards[0]
	installAuto(t, a, b, 50*time.Millisecond)
	la := sa.table.lanes[addrB]
	report, err := fec.LossReport{Expected: 10000, Received: 9500, Runs: 475}.AppendBinary([]byte{ctlLossReport})
	if err != nil {
		t.Fatal(err)
	}
	keepalive := func(f uint8) []byte { return []byte{ctlKeepalive, f, 0, 50} }
	legacy := func(when string) {
		t.Helper()
		if k, r := la.cur.enc.Ratio(); k > fec.LegacyMaxK || r > fec.LegacyMaxR {
			t.Fatalf("%s: the encoder runs %d:%d, beyond what the peer reads", when, k, r)
		}
	}
	for range 4 {
		sa.control(la, report)
	}
	legacy("no features heard")
	sa.control(la, keepalive(Features&^FeatureLongGroups))
	for range 4 {
		sa.control(la, report)
	}
	legacy("features without long groups")

	sa.control(la, keepalive(Features))
	for range 4 {
		sa.control(la, report)
	}
	k, r := la.cur.enc.Ratio()
	if k != fec.MaxK || r <= 15 {
		t.Fatalf("5%% loss to a peer reading long groups: %d:%d, want %d and more parity than 64:15", k, r, fec.MaxK)
	}
	// Long groups through 5% loss: every packet arrives.
	b.tun[0] = nil
	const n = 3 * fec.MaxK
	for i := range n {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, i))
	}
	sa.now = sa.now.Add(time.Second)
	sa.tick()
	deliverAll(t, a, b, func(i int) bool { return i%20 == 7 })
	sb.publish()
	sn := sb.Snapshot()
	rec := sn.Get(FECRecovered)
	if got := len(b.tun[0]); got != n {
		t.Fatalf("%d of %d packets arrived through 5%% loss in %d:%d groups (recovered %d)", got, n, k, r, rec)
	}
	if rec < n/25 {
		t.Fatalf("%d recovered of %d packets sent through 5%% loss", rec, n)
	}

	sa.control(la, keepalive(Features&^FeatureLongGroups))
	legacy("a keepalive without long groups")
	sa.control(la, keepalive(Features))
	sa.control(la, []byte{ctlKeepalive})
	legacy("an older router's keepalive")
}

// A fixed ratio beyond the legacy limits is cut to them until the peer
// announces long groups.
func TestFixedLongRatio(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 64, R: 20})
	sa := a.shards[0]
	la := sa.table.lanes[addrB]
	la.cfg.Mode = fec.Mode{Kind: fec.ModeFixed, K: 128, R: 40}
	la.applyFEC()
	if k, r := la.cur.enc.Ratio(); k != fec.LegacyMaxK || r != fec.LegacyMaxR {
		t.Fatalf("128:40 to a peer without long groups: %d:%d, want 64:32", k, r)
	}
	sa.control(la, []byte{ctlKeepalive, Features, 0, 0})
	if k, r := la.cur.enc.Ratio(); k != 128 || r != 40 {
		t.Fatalf("128:40 to a peer with long groups: %d:%d", k, r)
	}
}
