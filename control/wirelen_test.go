package control

import (
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

// Every lane of a peer, across rekeys, adds to the peer's one length
// sample, and our handshake messages to the peer draw their lengths from
// it: the initiation and the response each from their own side's sample
// (restricted to lengths they can take); a cookie reply draws from the
// built-in distribution, no longer than the initiation.
func TestHandshakeLengthsFromPeerSample(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 2, 2)
	pi, pr := ini.peerOf(t), resp.peerOf(t)
	check := func(m *memCore, p *peer) {
		t.Helper()
		if p.lens == nil {
			t.Fatal("peer without a length sample")
		}
		for i := range p.lanes {
			if lc := m.plane.lanes[laneAt{p.id, i}]; lc.Lens != p.lens {
				t.Fatalf("lane %d adds to %p, the peer's sample is %p", i, lc.Lens, p.lens)
			}
		}
	}
	// What the lanes published: the initiator sent 92s and 500s, the
	// responder 80s and 400s.
	for _, n := range []int{92, 500, 500, 500} {
		pi.lens.Add(n)
	}
	for _, n := range []int{80, 400} {
		pr.lens.Add(n)
	}
	var inits []sent
	for round := range 2 {
		if round == 0 {
			ini.kick(t)
		} else {
			ini.clock.Advance(DefaultRekeyAfter + DefaultRekeyAfter/rekeyJitterDiv + TimerPeriod)
			ini.Tick(ini.clock.Now())
		}
		inits = ini.take()
		if len(inits) != 1 || len(inits[0].b) != 500 {
			t.Fatalf("initiation lengths %v, want 500 (the only sampled length it can take)", lens(inits))
		}
		if round == 1 {
			break
		}
		resp.deliver(inits, ini.addr, ConnGroup)
		resps := resp.take()
		if len(resps) != 1 || len(resps[0].b) != 400 {
			t.Fatalf("response lengths %v, want 400", lens(resps))
		}
		ini.deliver(resps, resp.addr, ConnLane)
		check(ini, pi)
		check(resp, pr)
	}
	// The rekey, under load: the responder demands a cookie. Its replies
	// draw from the built-in distribution, not from the peer's sample
	// (anyone behind the peer's address could read that off them), and
	// are no longer than the initiation.
	// The responder drops a repeated initiation as a replay, so the other
	// 29 are distinct ones from the initiator's key, drawing their lengths
	// from the same sample (all 500 bytes).
	twin := crypto.NewLocal(ini.priv, true)
	tp, err := twin.AddPeer(resp.local.PublicKey(), crypto.PresharedKey{})
	if err != nil {
		t.Fatal(err)
	}
	tp.SetWireLengths(pi.lens)
	more := []sent{}
	for i := range 29 {
		_, d, err := twin.Initiate(tp, uint32(i), crypto.LaneOffer{Ports: []uint16{1000}}, resp.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(d) != len(inits[0].b) {
			t.Fatalf("twin initiation of %d bytes, want %d", len(d), len(inits[0].b))
		}
		more = append(more, sent{b: d, to: resp.addr})
	}
	resp.inits.set(resp.clock.Now(), 1<<30)
	seen := map[int]bool{}
	var replies []sent
	for i := range 30 {
		if i == 0 {
			resp.deliver(inits, ini.addr, ConnGroup) // replies[0] answers ini's
		} else {
			resp.deliver(more[i-1:i], ini.addr, ConnGroup)
		}
		for _, d := range resp.take() {
			if len(d.b) > len(inits[0].b) {
				t.Fatalf("cookie reply of %d bytes to a %d-byte initiation", len(d.b), len(inits[0].b))
			}
			seen[len(d.b)] = true
			replies = append(replies, d)
		}
	}
	if len(seen) < 3 || len(replies) != 30 {
		t.Fatalf("%d cookie replies, lengths %v: want 30 of varied lengths", len(replies), seen)
	}
	ini.deliver(replies[:1], resp.addr, ConnLane)

	// Retried with mac2 (still under load): the response is as long as
	// the responder's one feasible sampled length.
	ini.kick(t)
	inits = ini.take()
	if len(inits) != 1 || len(inits[0].b) != 500 {
		t.Fatalf("retried initiation lengths %v, want 500", lens(inits))
	}
	resp.deliver(inits, ini.addr, ConnGroup)
	resps := resp.take()
	if len(resps) != 1 || len(resps[0].b) != 400 {
		t.Fatalf("response lengths %v, want 400", lens(resps))
	}
	before := pi.nHS
	ini.deliver(resps, resp.addr, ConnLane)
	if ini.peerOf(t).nHS != before+1 {
		t.Fatal("the rekey did not complete")
	}
	check(ini, pi)
	check(resp, pr)
}

func lens(ds []sent) []int {
	var out []int
	for _, d := range ds {
		out = append(out, len(d.b))
	}
	return out
}

// Every lane of a peer, on both sides, predicts with the peer's one
// record of its path's bursts (fec.PathBursts), as with its one length
// sample.
func TestLanesSharePeerBursts(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 2, 2)
	ini.kick(t)
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	for _, m := range []*memCore{ini, resp} {
		p := m.peerOf(t)
		if p.bursts == nil || p.lanes < 2 {
			t.Fatalf("peer with bursts %p and %d lanes, want a record and 2 lanes", p.bursts, p.lanes)
		}
		for i := range p.lanes {
			if lc := m.plane.lanes[laneAt{p.id, i}]; lc.Bursts != p.bursts {
				t.Fatalf("lane %d predicts with %p, the peer's record is %p", i, lc.Bursts, p.bursts)
			}
		}
	}
}
