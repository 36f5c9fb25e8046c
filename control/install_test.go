package control

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A completed session's lanes as the core hands them to the data plane:
// where they go, on which socket, with which FEC mode, round trip and
// proof of the peer's address. In memory on a fake clock.

// Lanes: min of both sides' shards; the initiator owns lane i on shard i
// and confirms the keys at once; the responder holds its first send until
// the initiator's first datagram, puts the lane whose socket sent the
// initiation on the shard it arrived on (steered by port) or keeps lane i
// on shard i (steered by lane remote). (That every other shard learns
// each lane's owner is the group's: shard/group_test.go.)
func TestInstallPlacesLanes(t *testing.T) {
	for _, steered := range []bool{false, true} {
		t.Run(fmt.Sprintf("steered=%v", steered), func(t *testing.T) { installPlacesLanes(t, steered) })
	}
}

func installPlacesLanes(t *testing.T, steered bool) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 4, 3)
	resp.plane.steered = steered
	var from int
	for {
		ini.kick(t)
		out := ini.take()
		from = out[0].sh
		if from < 3 { // a lane the session will run
			resp.Unmatched(2, ConnGroup, out[0].b, netip.AddrPortFrom(ini.addr.Addr(), ini.plane.lanePorts[from]), netip.Addr{})
			break
		}
		ini.clock.Advance(HandshakeTimeout + 16*time.Second)
	}
	for _, d := range resp.take() {
		ini.Unmatched(from, ConnLane, d.b, resp.addr, netip.Addr{})
	}
	if ini.peerOf(t).sess == nil {
		t.Fatal("no session")
	}
	ip, rp := ini.peerOf(t).id, resp.peerOf(t).id
	if len(ini.plane.lanes) != 3 || len(resp.plane.lanes) != 3 {
		t.Fatalf("lanes: initiator %d, responder %d; want 3", len(ini.plane.lanes), len(resp.plane.lanes))
	}
	if ini.plane.confirms != 3 || resp.plane.confirms != 0 {
		t.Fatalf("key confirmations: initiator %d, responder %d", ini.plane.confirms, resp.plane.confirms)
	}
	for i := range 3 {
		il, rl := ini.plane.lanes[laneAt{ip, i}], resp.plane.lanes[laneAt{rp, i}]
		if ini.plane.owner[laneAt{ip, i}] != i || il.Conn != ConnLane || il.HoldTx || il.Remote != netip.AddrPortFrom(resp.addr.Addr(), resp.plane.listen) {
			t.Fatalf("initiator lane %d: owner %d, %+v", i, ini.plane.owner[laneAt{ip, i}], il)
		}
		if !rl.HoldTx || rl.Conn != ConnGroup || rl.Remote != netip.AddrPortFrom(ini.addr.Addr(), ini.plane.lanePorts[i]) {
			t.Fatalf("responder lane %d: %+v", i, rl)
		}
	}
	if o := resp.plane.owner[laneAt{rp, from}]; !steered && o != 2 {
		t.Fatalf("the sending lane %d is on shard %d, its initiation arrived on 2", from, o)
	}
	for i := range 3 {
		if o := resp.plane.owner[laneAt{rp, i}]; steered && o != i {
			t.Fatalf("steered by lane remote, lane %d is on shard %d", i, o)
		}
	}
	seen := map[int]bool{}
	for i := range 3 {
		seen[resp.plane.owner[laneAt{rp, i}]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("responder lanes share shards: %v", resp.plane.owner)
	}
}

// SetFEC changes the mode of lanes installed afterwards.
func TestSetFECAppliesToNewLanes(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	ini.SetFEC(fec.Mode{Kind: fec.ModeFixed, K: 8, R: 2})
	handshake(t, ini, resp)
	lc := ini.plane.lanes[laneAt{ini.peerOf(t).id, 0}]
	if lc.Mode.Kind != fec.ModeFixed || lc.FEC.K != 8 || lc.FEC.R != 2 {
		t.Fatalf("lane FEC %+v mode %+v", lc.FEC, lc.Mode)
	}
}

// The initiator's lanes learn the handshake's round trip (initiation to
// response); the responder's measure their own (shard.LaneConfig.RTT).
func TestInitiatorLanesGetHandshakeRTT(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	ini.kick(t)
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.clock.Advance(40 * time.Millisecond)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if got := ini.plane.lanes[laneAt{ini.peerOf(t).id, 0}].RTT; got != 40*time.Millisecond {
		t.Fatalf("initiator's lane RTT %s, want 40ms", got)
	}
	if got := resp.plane.lanes[laneAt{resp.peerOf(t).id, 0}].RTT; got != 0 {
		t.Fatalf("responder's lane RTT %s, want 0 (it measures its own)", got)
	}
}

// An initiator's lanes are proven at the responder's address only when
// the response came from where the initiation went (claim.go in shard):
// a response from elsewhere (the responder's other address, or another
// peer spoofing its source) installs them unproven. A responder's install
// is never proven by the handshake alone.
func TestInitiatorLanesProvenOnlyFromAskedAddress(t *testing.T) {
	for _, moved := range []bool{false, true} {
		ini, resp := memPair(t, "198.51.100.7:40000")
		ini.kick(t)
		resp.deliver(ini.take(), ini.addr, ConnGroup)
		from := resp.addr
		if moved {
			from = netip.MustParseAddrPort("192.0.2.99:51820")
		}
		ini.deliver(resp.take(), from, ConnLane)
		if ini.peerOf(t).sess == nil {
			t.Fatal("handshake did not complete")
		}
		for _, m := range []*memCore{ini, resp} {
			m.plane.mu.Lock()
			for k, lc := range m.plane.lanes {
				want := m == ini && !moved
				if lc.Proven != want {
					t.Errorf("moved %v: %s lane %d: Proven %v, want %v", moved, map[bool]string{true: "initiator", false: "responder"}[m == ini], k.index, lc.Proven, want)
				}
			}
			m.plane.mu.Unlock()
		}
	}
}
