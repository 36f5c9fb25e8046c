package control

import (
	"testing"
	"time"
)

// silentRekey makes a session between ini and resp, lets 10 s pass and
// has ini's lanes report resp silent: what ini sent then (its new
// initiation), and ini's peer.
func silentRekey(t *testing.T) (ini, resp *memCore, p *peer, out []sent) {
	t.Helper()
	ini, resp = memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	ini.clock.Advance(10 * time.Second)
	p = ini.peerOf(t)
	ini.PeerSilent(0, p.id, false)
	ini.Step()
	return ini, resp, p, ini.take()
}

// A new handshake the lanes asked for (PeerSilent) whose response is
// lost, while the session's keys still carry traffic both ways (so the
// lanes never go silent again), is retried at its backoff from the
// timers, and the retry's response makes one session of both ends.
func TestLostRekeyResponseRetried(t *testing.T) {
	ini, resp, p, first := silentRekey(t)
	if len(first) != 1 {
		t.Fatalf("silent lanes: %d initiations, want 1", len(first))
	}
	resp.deliver(first, ini.addr, ConnGroup)
	if lost := resp.take(); len(lost) != 1 {
		t.Fatalf("the responder sent %d datagrams, want its response", len(lost))
	}
	if sessionsAgree(t, ini, resp) {
		t.Fatal("the ends agree on a session whose response was lost")
	}
	// The lanes answer under the old keys: no PeerSilent, only the
	// timers, up to the response's timeout (past the backoff) and past it.
	var next time.Time
	ini.locked(func() { next = p.initAt.Add(HandshakeTimeout) })
	ini.clock.Advance(next.Sub(ini.clock.Now()) - time.Millisecond)
	ini.Tick(ini.clock.Now())
	if n := len(ini.take()); n != 0 {
		t.Fatalf("before the response is overdue: %d initiations", n)
	}
	ini.clock.Advance(2 * time.Millisecond)
	ini.Tick(ini.clock.Now())
	retry := ini.take()
	if len(retry) != 1 {
		t.Fatalf("the response lost and overdue: %d initiations, want a retry", len(retry))
	}
	resp.deliver(retry, ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if !sessionsAgree(t, ini, resp) {
		t.Fatal("the retry's handshake did not make one session of both ends")
	}
	ini.clock.Advance(time.Minute)
	ini.Tick(ini.clock.Now())
	if n := len(ini.take()); n != 0 {
		t.Fatalf("a minute after the retry completed: %d initiations", n)
	}
}

// A peer that answers under the session's keys but never completes a
// handshake gets sessionRetries initiations in all before the session is
// due for its rekey (which retries on its own), not one every 15 s.
func TestSessionRetriesBounded(t *testing.T) {
	ini, _, _, first := silentRekey(t)
	sent := len(first)
	for range 109 { // to 119 s: before the rekey (120 s and its jitter)
		ini.clock.Advance(time.Second)
		ini.Tick(ini.clock.Now())
		sent += len(ini.take())
	}
	if sent != sessionRetries {
		t.Fatalf("%d initiations to a peer that never answers them, want %d", sent, sessionRetries)
	}
}
