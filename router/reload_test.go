package router

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
)

// Reload names the changed settings it cannot apply, keeps running with
// their old values, and applies nothing when the new peers are not all
// usable.
func TestReloadReportsAndIsWhole(t *testing.T) {
	m := newTestRouter(t)
	k1, _ := crypto.GeneratePrivateKey()
	p1 := config.Peer{PublicKey: k1.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}
	m.cfg = &config.Config{Interface: config.Interface{Name: "yip0", MTU: 1400, ListenPort: 5000, Shards: config.Shards{Auto: true},
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.9/24")}}, Peers: []config.Peer{p1}}
	if err := m.core.SetPeers(m.cfg.Peers); err != nil {
		t.Fatal(err)
	}

	nc := *m.cfg
	nc.Interface.Addresses = []netip.Prefix{netip.MustParsePrefix("10.9.1.9/24")}
	nc.Interface.MetricsListen = "127.0.0.1:9100"
	restart, err := m.Reload(&nc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(restart, []string{"Address", "MetricsListen"}) {
		t.Fatalf("need restart: %v", restart)
	}
	if m.cfg.Interface.Addresses[0] != netip.MustParsePrefix("10.9.0.9/24") || m.cfg.Interface.MetricsListen != "" {
		t.Fatalf("running configuration shows settings that were not applied: %+v", m.cfg.Interface)
	}

	// A new peer, then an unusable one (our own key): nothing applied.
	k2, _ := crypto.GeneratePrivateKey()
	bad := *m.cfg
	bad.Peers = []config.Peer{p1,
		{PublicKey: k2.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}},
		{PublicKey: m.local.PublicKey(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.3/32")}}}
	_, err = m.Reload(&bad)
	if err == nil || errors.Is(err, ErrReloadPartial) {
		t.Fatalf("reload with our own key as a peer: %v", err)
	}
	if n := len(m.core.Peers()); n != 1 || m.local.Peer(k2.Public()) != nil {
		t.Fatalf("a refused reload applied peers: %v", m.core.Peers())
	}

	// An MTU change and a new peer in one edit: the peer applies, the MTU
	// is reported and stays (issue: the whole reload used to be refused).
	mtu := *m.cfg
	mtu.Interface.MTU = 1300
	mtu.Peers = []config.Peer{p1, {PublicKey: k2.Public()}} // no routes: this test router has no device
	restart, err = m.Reload(&mtu)
	if err != nil || !slices.Contains(restart, "MTU") {
		t.Fatalf("MTU change with a new peer: restart %v, %v", restart, err)
	}
	if m.local.Peer(k2.Public()) == nil || m.cfg.Interface.MTU != 1400 {
		t.Fatalf("the new peer was not added (%v) or the MTU changed to %d", m.local.Peer(k2.Public()) != nil, m.cfg.Interface.MTU)
	}

	// The shards are chosen once, at start.
	sh := *m.cfg
	sh.Interface.Shards = config.Shards{N: 2}
	restart, err = m.Reload(&sh)
	if err != nil || !slices.Equal(restart, []string{"Shards"}) || m.cfg.Interface.Shards != (config.Shards{Auto: true}) {
		t.Fatalf("auto to 2 shards: restart %v, %v, running %v", restart, err, m.cfg.Interface.Shards)
	}
}

// Reload refuses an Endpoint of the other family than the running sockets,
// as New does, instead of applying a peer nothing can be sent to.
func TestReloadRefusesOtherFamilyEndpoint(t *testing.T) {
	m := newTestRouter(t)
	m.cfg = &config.Config{Interface: config.Interface{Name: "yip0", MTU: 1400, ListenPort: 5000}}
	k, _ := crypto.GeneratePrivateKey()
	nc := &config.Config{Interface: m.cfg.Interface, Peers: []config.Peer{{Line: 7, PublicKey: k.Public(),
		Endpoint:   netip.MustParseAddrPort("[2001:db8::1]:51820"),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.2/32")}}}}
	if _, err := m.Reload(nc); err == nil || !strings.Contains(err.Error(), "line 7") {
		t.Fatalf("reload of an IPv6 endpoint on an IPv4 router: %v", err)
	}
	if n := len(m.core.Peers()); n != 0 {
		t.Fatalf("%d peers applied", n)
	}
}

// The wg-quick settings are set up at start: a reload names a changed
// Table, FwMark or hook as needing a restart (the running PreDown and
// PostDown stay the ones shutdown runs), and refuses, whole, an edit that
// would start or end a full tunnel; moving the default route to another
// peer is fine.
func TestReloadWgQuickSettings(t *testing.T) {
	m := newTestRouter(t)
	k1, _ := crypto.GeneratePrivateKey()
	k2, _ := crypto.GeneratePrivateKey()
	def := netip.MustParsePrefix("0.0.0.0/0")
	m.cfg = &config.Config{Interface: config.Interface{Name: "yip0", MTU: 1400, Table: config.Table{Mode: config.TableID, ID: 254, Name: "main"},
		Hooks: config.Hooks{PostDown: []string{"echo down"}}},
		Peers: []config.Peer{{PublicKey: k1.Public()}}}
	if err := m.core.SetPeers(m.cfg.Peers); err != nil {
		t.Fatal(err)
	}
	nc := *m.cfg
	nc.Interface.Table = config.Table{Mode: config.TableID, ID: 254, Name: "254"} // the same table
	nc.Interface.FwMark = 0x2a
	nc.Interface.Hooks = config.Hooks{PostUp: []string{"echo up"}, PostDown: []string{"echo down"}}
	restart, err := m.Reload(&nc)
	if err != nil || !slices.Equal(restart, []string{"FwMark", "PostUp"}) {
		t.Fatalf("restart %v, %v", restart, err)
	}
	nc.Interface.Table = config.Table{Mode: config.TableOff}
	nc.Interface.Hooks.PostDown = nil
	if restart, _ = m.Reload(&nc); !slices.Equal(restart, []string{"Table", "FwMark", "PostUp", "PostDown"}) {
		t.Fatalf("restart %v", restart)
	}
	if ic := m.cfg.Interface; ic.Table.Name != "main" || ic.FwMark != 0 || !slices.Equal(ic.Hooks.PostDown, []string{"echo down"}) || ic.Hooks.PostUp != nil {
		t.Fatalf("running interface changed: %+v", ic)
	}

	// Table = auto: a default route in AllowedIPs is a full tunnel.
	m.cfg.Interface.Table = config.Table{}
	full := *m.cfg
	full.Peers = []config.Peer{{PublicKey: k1.Public(), AllowedIPs: []netip.Prefix{def}}}
	if _, err := m.Reload(&full); err == nil || !strings.Contains(err.Error(), "0.0.0.0/0, a full tunnel for IPv4") || errors.Is(err, ErrReloadPartial) {
		t.Fatalf("reload starting a full tunnel: %v", err)
	}
	if p := m.core.Peers(); len(p) != 1 {
		t.Fatalf("a refused reload applied peers: %v", p)
	}
	m.cfg = &full // as if started so
	moved := full
	moved.Peers = []config.Peer{{PublicKey: k1.Public()}, {PublicKey: k2.Public(), AllowedIPs: []netip.Prefix{def}}}
	if _, err := m.Reload(&moved); err != nil {
		t.Fatalf("moving the default route to another peer: %v", err)
	}
	if m.local.Peer(k2.Public()) == nil {
		t.Fatal("the new peer was not added")
	}
	ended := moved
	ended.Peers = moved.Peers[:1]
	if _, err := m.Reload(&ended); err == nil || !strings.Contains(err.Error(), "ends the full tunnel for IPv4") {
		t.Fatalf("reload ending a full tunnel: %v", err)
	}
}

// Table decides the table AllowedIPs go into; with auto a default route
// is the full tunnel's, with a table number it is an ordinary route, with
// off nothing is routed.
func TestSplitRoutes(t *testing.T) {
	p := netip.MustParsePrefix
	all := []netip.Prefix{p("10.0.0.0/8"), p("0.0.0.0/0"), p("::/0"), p("fd00::/8")}
	for _, tc := range []struct {
		table            config.Table
		id               int
		routes, defaults []netip.Prefix
	}{
		{config.Table{}, 254, []netip.Prefix{p("10.0.0.0/8"), p("fd00::/8")}, []netip.Prefix{p("0.0.0.0/0"), p("::/0")}},
		{config.Table{Mode: config.TableID, ID: 1234}, 1234, all, nil},
		{config.Table{Mode: config.TableOff}, 0, nil, nil},
	} {
		routes, defaults := splitRoutes(tc.table, all)
		if id := routeTable(tc.table); id != tc.id || !slices.Equal(routes, tc.routes) || !slices.Equal(defaults, tc.defaults) {
			t.Errorf("Table %s: table %d, routes %v, defaults %v", tc.table, id, routes, defaults)
		}
	}
}
