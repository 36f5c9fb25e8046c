package control

import (
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/testclock"
)

// An Endpoint name's new address (SetResolvedEndpoint): a peer without an
// address gets it and starts a handshake; a working session keeps its
// address; handshakes that go unanswered move to the new one at once.
func TestSetResolvedEndpoint(t *testing.T) {
	clock := testclock.New(epoch)
	ini := newMemCore(t, "198.51.100.7:40000", 1, clock)
	resp := newMemCore(t, "192.0.2.1:51820", 1, clock)
	name := config.HostPort{Host: "gw.example", Port: 51820}
	// The name did not resolve at start: no address.
	if err := ini.SetPeers([]config.Peer{{PublicKey: resp.local.PublicKey(), EndpointName: name,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}); err != nil {
		t.Fatal(err)
	}
	if err := resp.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	k := resp.local.PublicKey()
	ini.kick(t)
	if out := ini.take(); len(out) != 0 {
		t.Fatalf("a peer without an address was sent %d datagrams", len(out))
	}

	// The name resolves: the peer gets the address and a handshake.
	if !ini.SetResolvedEndpoint(k, name, resp.addr) {
		t.Fatal("a peer without an address did not take the resolved one")
	}
	handshake(t, ini, resp)
	if ep := peerInfo(t, ini, k).Endpoint; ep != resp.addr {
		t.Fatalf("endpoint %s", ep)
	}

	// The name moves while the session works: the session stays where
	// it works.
	elsewhere := netip.MustParseAddrPort("203.0.113.5:51820")
	if ini.SetResolvedEndpoint(k, name, elsewhere) || peerInfo(t, ini, k).Endpoint != resp.addr || len(ini.plane.remotes) != 0 {
		t.Fatalf("a working session moved to the resolved address: endpoint %s, moves %v",
			peerInfo(t, ini, k).Endpoint, ini.plane.remotes)
	}
	if ini.HandshakesUnanswered(k) {
		t.Fatal("handshakes reported unanswered while they work")
	}

	// The peer stops answering (a rekey's initiation and its retry get
	// no response): the next lookup's address takes over, with a first
	// attempt at the next tick.
	p := ini.peerOf(t)
	clock.Advance(DefaultRekeyAfter + DefaultRekeyAfter/rekeyJitterDiv + 1)
	ini.Tick(clock.Now()) // the rekey's initiation, not delivered
	if ini.HandshakesUnanswered(k) {
		t.Fatal("an initiation reported unanswered before its retry")
	}
	ini.kickPeer(p) // its retry, not delivered either
	if n := len(ini.take()); n != 2 {
		t.Fatalf("%d initiations sent, want 2", n)
	}
	if !ini.HandshakesUnanswered(k) {
		t.Fatal("two unanswered initiations not reported")
	}
	if !ini.SetResolvedEndpoint(k, name, elsewhere) {
		t.Fatal("unanswered handshakes did not move to the resolved address")
	}
	if got := ini.plane.remotes; len(got) != 1 || got[0] != [2]netip.AddrPort{resp.addr, elsewhere} {
		t.Fatalf("lanes moved %v", got)
	}
	ini.Tick(clock.Now())
	out := ini.take()
	if len(out) != 1 || out[0].to != elsewhere {
		t.Fatalf("after the move, sent %v", out)
	}

	// A peer whose Endpoint is no longer a name (a reload wrote an
	// address) is left alone, as is an unknown key.
	if err := ini.SetPeers([]config.Peer{{PublicKey: k, Endpoint: elsewhere}}); err != nil {
		t.Fatal(err)
	}
	if ini.SetResolvedEndpoint(k, name, resp.addr) || ini.SetResolvedEndpoint(ini.local.PublicKey(), name, resp.addr) {
		t.Fatal("an endpoint without a name, or an unknown peer, took a resolved address")
	}
}

// A lookup of a name a reload has since replaced changes nothing, and a
// reload that looks the same name up again follows the resolver's rule: a
// working session stays where it works, a failed lookup keeps the last
// address.
func TestResolvedNameAfterReload(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	k := resp.local.PublicKey()
	old := config.HostPort{Host: "old.example", Port: 51820}
	named := func(n config.HostPort, ep netip.AddrPort) []config.Peer {
		return []config.Peer{{PublicKey: k, EndpointName: n, Endpoint: ep,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}
	}
	if err := ini.SetPeers(named(old, resp.addr)); err != nil {
		t.Fatal(err)
	}
	handshake(t, ini, resp)

	// The same name resolves elsewhere at a reload: the working session
	// stays; a reload whose lookup failed keeps the last address.
	elsewhere := netip.MustParseAddrPort("203.0.113.5:51820")
	if err := ini.SetPeers(named(old, elsewhere)); err != nil {
		t.Fatal(err)
	}
	if ep := peerInfo(t, ini, k).Endpoint; ep != resp.addr || len(ini.plane.remotes) != 0 {
		t.Fatalf("a reload's lookup moved a working session: endpoint %s, moves %v", ep, ini.plane.remotes)
	}
	if err := ini.SetPeers(named(old, netip.AddrPort{})); err != nil {
		t.Fatal(err)
	}
	if c := peerInfo(t, ini, k).Config.Endpoint; c != elsewhere {
		t.Fatalf("a failed reload lookup left the configured endpoint at %v, want the last, %s", c, elsewhere)
	}

	// A reload renames it; the old name's lookup, finishing late, is
	// ignored.
	renamed := config.HostPort{Host: "new.example", Port: 51820}
	if err := ini.SetPeers(named(renamed, resp.addr)); err != nil {
		t.Fatal(err)
	}
	ini.locked(func() { ini.peerOf0().attempts = 2 }) // unanswered: a lookup would move it
	if ini.SetResolvedEndpoint(k, old, elsewhere) {
		t.Fatal("a lookup of the replaced name moved the peer")
	}
	if c := peerInfo(t, ini, k).Config.Endpoint; c != resp.addr {
		t.Fatalf("a lookup of the replaced name set the configured endpoint to %s", c)
	}
	if !ini.SetResolvedEndpoint(k, renamed, elsewhere) {
		t.Fatal("a lookup of the current name did not move an unanswered peer")
	}
}
