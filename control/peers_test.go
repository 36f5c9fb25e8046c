package control

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// Reload of the peer set (SetPeers): what a new configuration adds,
// removes and changes, and what it leaves alone.
func TestSetPeersReload(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	rp := ini.peerOf(t)
	base := []config.Peer{{PublicKey: resp.local.PublicKey(), Endpoint: resp.addr,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}}}
	route := func(ip string) shard.PeerID {
		ini.plane.mu.Lock()
		defer ini.plane.mu.Unlock()
		return ini.plane.table.Lookup4(netip.MustParseAddr(ip).As4())
	}

	// Unchanged: the session stays.
	if err := ini.SetPeers(base); err != nil {
		t.Fatal(err)
	}
	if ini.peerOf(t).sess == nil || ini.plane.removed[rp.id] != 0 {
		t.Fatal("an unchanged peer lost its session")
	}

	// A new peer: it gets routes and an ID; the first keeps its own.
	k2, _ := crypto.GeneratePrivateKey()
	two := append(base, config.Peer{PublicKey: k2.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.1.0/24")}})
	if err := ini.SetPeers(two); err != nil {
		t.Fatal(err)
	}
	if len(ini.Peers()) != 2 || route("10.9.1.77") == 0 || route("10.9.1.77") == rp.id || route("10.9.0.2") != rp.id {
		t.Fatalf("after adding a peer: %d peers, routes %d %d", len(ini.Peers()), route("10.9.1.77"), route("10.9.0.2"))
	}

	// Keepalive and Endpoint changes reach the shards.
	moved := base[0]
	moved.Endpoint = netip.MustParseAddrPort("192.0.2.99:51820")
	moved.PersistentKeepalive = 10 * time.Second
	if err := ini.SetPeers([]config.Peer{moved, two[1]}); err != nil {
		t.Fatal(err)
	}
	if ini.plane.keepalive[rp.id] != 10*time.Second {
		t.Fatal("keepalive change not sent to the shards")
	}
	if len(ini.plane.remotes) != 1 || ini.plane.remotes[0] != [2]netip.AddrPort{resp.addr, moved.Endpoint} {
		t.Fatalf("endpoint change moved %v", ini.plane.remotes)
	}
	if ep := peerInfo(t, ini, resp.local.PublicKey()).Endpoint; ep != moved.Endpoint {
		t.Fatalf("endpoint %s after the change", ep)
	}

	// A changed PSK ends the session (its keys came from the old one).
	psk := moved
	psk.PresharedKey = crypto.PresharedKey{1}
	if err := ini.SetPeers([]config.Peer{psk, two[1]}); err != nil {
		t.Fatal(err)
	}
	if ini.peerOf0Key(resp.local.PublicKey()).sess != nil || ini.plane.removed[rp.id] != 1 {
		t.Fatal("a PSK change kept the session")
	}

	// A removed peer loses its lanes, routes, pending handshake and its
	// address's place among the known ones.
	ini.kickPeer(rp)
	if ini.npending.Load() == 0 {
		t.Fatal("no initiation pending")
	}
	if err := ini.SetPeers(two[1:]); err != nil {
		t.Fatal(err)
	}
	if ini.plane.removed[rp.id] != 2 || route("10.9.0.2") != 0 || ini.npending.Load() != 0 || ini.local.Peer(resp.local.PublicKey()) != nil {
		t.Fatalf("removed peer: removals %d, route %d, pending %d", ini.plane.removed[rp.id], route("10.9.0.2"), ini.npending.Load())
	}
	if _, ok := ini.known.Load(moved.Endpoint.Addr()); ok {
		t.Fatal("a removed peer's address is still known")
	}

	// A configuration that cannot be applied says which peer.
	err := ini.SetPeers([]config.Peer{{Line: 12, PublicKey: ini.local.PublicKey()}})
	if err == nil || !strings.Contains(err.Error(), "line 12") {
		t.Fatalf("our own key as a peer: %v", err)
	}
}

// peerInfo is m's peer with key k as Peers reports it.
func peerInfo(t *testing.T, m *memCore, k crypto.PublicKey) PeerInfo {
	t.Helper()
	for _, p := range m.Peers() {
		if p.Config.PublicKey == k {
			return p
		}
	}
	t.Fatalf("no peer %s", k)
	return PeerInfo{}
}

// peerOf0Key is m's peer with key k.
func (m *memCore) peerOf0Key(k crypto.PublicKey) *peer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peers[k]
}

// Peers and Counts report what happened: handshakes, the endpoint, who
// initiated.
func TestPeersAndCounts(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	pi := peerInfo(t, ini, resp.local.PublicKey())
	pr := peerInfo(t, resp, ini.local.PublicKey())
	if !pi.Session || !pi.Initiator || pi.Handshakes != 1 || pi.Endpoint != resp.addr || !pi.LastHandshake.Equal(epoch) {
		t.Fatalf("initiator's view %+v", pi)
	}
	if !pr.Session || pr.Initiator || pr.Endpoint != ini.addr {
		t.Fatalf("responder's view %+v", pr)
	}
	if c := ini.Counts(); c.Initiated != 1 || c.Completed != 1 || c.Answered != 0 {
		t.Fatalf("initiator counts %+v", c)
	}
	if c := resp.Counts(); c.Answered != 1 || c.Refused != 0 {
		t.Fatalf("responder counts %+v", c)
	}
}

// The zero Deps fields take their defaults: the real clock and randomness.
func TestNewDefaults(t *testing.T) {
	priv, _ := crypto.GeneratePrivateKey()
	c := New(Deps{Local: crypto.NewLocal(priv, true), Plane: newFakePlane(2)})
	if c.rekeyAfter != DefaultRekeyAfter || c.shards != 2 || time.Since(c.now()) > time.Minute {
		t.Fatalf("defaults: rekey %s, shards %d", c.rekeyAfter, c.shards)
	}
	seen := map[uint32]bool{}
	for range 8 {
		seen[c.rnd.Uint32()] = true
		if n := c.rnd.IntN(3); n < 0 || n >= 3 {
			t.Fatalf("IntN(3) = %d", n)
		}
	}
	if len(seen) < 7 {
		t.Fatalf("8 indices, %d distinct", len(seen))
	}
}
