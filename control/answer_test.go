package control

// The responder's side of a handshake in the cases the other tests leave
// out: an initiation another shard handed over, one sent from a lane the
// session will not run, and a response the socket refused.

import (
	"errors"
	"net/netip"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// An initiation handed over by another shard (conn < 0: it has no socket
// of this shard) is answered on the shard's listening socket, from the
// shard it is handled on.
func TestHandedOverInitiationAnsweredOnGroupSocket(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	ini.kick(t)
	for _, d := range ini.take() {
		resp.Unmatched(0, -1, d.b, ini.addr, netip.Addr{})
	}
	out := resp.take()
	if len(out) != 1 || out[0].conn != ConnGroup || out[0].sh != 0 || out[0].to != ini.addr {
		t.Fatalf("answers %+v; want one on shard 0's group socket (%d) to %v", out, ConnGroup, ini.addr)
	}
	ini.deliver(out, resp.addr, ConnLane)
	if !sessionsAgree(t, ini, resp) {
		t.Fatal("the answer to a handed-over initiation made no session")
	}
}

// An initiation sent from the initiator's lane 2 to a responder with one
// shard: the session runs lane 0 only, so the responder's handshakes go to
// lane 0's offered port at the initiation's address, not to the port the
// initiation came from.
func TestInitiationFromLaneBeyondSession(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 3, 1)
	ports := []uint16{40000, 40001, 40002}
	var cp *crypto.Peer
	ini.locked(func() { cp = ini.peerOf0().cp })
	_, dgram, err := ini.local.Initiate(cp, 77, crypto.LaneOffer{Ports: ports, From: 2}, ini.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	from := netip.AddrPortFrom(ini.addr.Addr(), ports[2])
	if resp.Unmatched(0, ConnGroup, dgram, from, netip.Addr{}) != shard.Answered {
		t.Fatal("initiation not taken")
	}
	if n := resp.Counts().Answered; n != 1 {
		t.Fatalf("answered %d initiations, want 1", n)
	}
	want := netip.AddrPortFrom(ini.addr.Addr(), ports[0])
	if ps := resp.Peers(); len(ps) != 1 || ps[0].Endpoint != want || !ps[0].Session {
		t.Fatalf("responder's peer %+v; want a session, endpoint %v", ps, want)
	}
	if out := resp.take(); len(out) != 1 || out[0].to != from {
		t.Fatalf("response sent %+v; want one, to where the initiation came from (%v)", out, from)
	}
}

// A response the socket refuses is logged (WARN): the session is
// installed all the same, and the initiator's retry makes the one both
// sides agree on.
func TestRefusedResponseWarned(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	core, logs := observer.New(zap.WarnLevel)
	resp.Core.log = zap.New(core)
	resp.plane.send = func(int, int, []byte, netip.AddrPort) error { return errors.New("sendto: no buffer space") }
	ini.kick(t)
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	warns := logs.FilterMessage("sending handshake response")
	if warns.Len() != 1 || warns.All()[0].ContextMap()["to"] != ini.addr.String() {
		t.Fatalf("warnings %v; want one naming %v", logs.All(), ini.addr)
	}
	if ps := resp.Peers(); len(ps) != 1 || !ps[0].Session || resp.Counts().Answered != 1 {
		t.Fatalf("responder: %+v, answered %d", ps, resp.Counts().Answered)
	}
	resp.plane.send = nil
	ini.kick(t) // the retry, after its backoff
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if !sessionsAgree(t, ini, resp) {
		t.Fatal("no agreed session after the retry")
	}
}
