package router

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
)

// fakeEndpoints is the control core as the resolver sees it.
type fakeEndpoints struct {
	unanswered map[crypto.PublicKey]bool
	set        map[crypto.PublicKey]netip.AddrPort
}

func (f *fakeEndpoints) HandshakesUnanswered(k crypto.PublicKey) bool { return f.unanswered[k] }
func (f *fakeEndpoints) SetResolvedEndpoint(k crypto.PublicKey, _ config.HostPort, ep netip.AddrPort) bool {
	f.set[k] = ep
	return true
}

// fakeNames answers lookups from a map (a missing name fails) and counts
// them.
type fakeNames struct {
	addrs map[string][]netip.Addr
	asked []string
}

func (f *fakeNames) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	f.asked = append(f.asked, host)
	if a, ok := f.addrs[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

// When the resolver looks a name up again (every period; after a tenth of
// it when the name has no address or the peer does not answer), what a
// failure keeps, and what it logs.
func TestResolverSchedule(t *testing.T) {
	k1, _ := crypto.GeneratePrivateKey()
	k2, _ := crypto.GeneratePrivateKey()
	a, b := k1.Public(), k2.Public()
	names := &fakeNames{addrs: map[string][]netip.Addr{"a.test": {netip.MustParseAddr("192.0.2.1")}}}
	core := &fakeEndpoints{unanswered: map[crypto.PublicKey]bool{}, set: map[crypto.PublicKey]netip.AddrPort{}}
	obs, logs := observer.New(zapcore.DebugLevel)
	rs := newResolver(names.lookup, netip.IPv4Unspecified(), core, zap.New(obs), 100*time.Second)
	if rs.retry() != 10*time.Second || rs.tick() != 5*time.Second {
		t.Fatalf("retry %v, tick %v", rs.retry(), rs.tick())
	}
	peers := []config.Peer{
		// a resolved at load; b did not (the config warned).
		{PublicKey: a, EndpointName: config.HostPort{Host: "a.test", Port: 1}, Endpoint: netip.MustParseAddrPort("192.0.2.1:1")},
		{PublicKey: b, EndpointName: config.HostPort{Host: "b.test", Port: 2}},
		{PublicKey: crypto.PublicKey{9}, Endpoint: netip.MustParseAddrPort("192.0.2.9:9")}, // no name
	}
	t0 := time.Unix(1_000_000, 0)
	ctx := context.Background()
	step := func(at time.Duration, want ...string) {
		t.Helper()
		names.asked = nil
		rs.sweep(ctx, t0.Add(at), peers)
		if len(names.asked) != len(want) || len(want) > 0 && names.asked[0] != want[0] || len(want) > 1 && names.asked[1] != want[1] {
			t.Fatalf("at %v: looked up %v, want %v", at, names.asked, want)
		}
	}
	step(0)                        // the config's lookups stand
	step(9 * time.Second)          // too early for anything
	step(10*time.Second, "b.test") // b has no address: retried
	if len(core.set) != 0 {
		t.Fatalf("a failed lookup reached the core: %v", core.set)
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("%d WARNs for a name the config already warned about", n)
	}
	core.unanswered[a] = true
	step(20*time.Second, "a.test", "b.test") // a does not answer; b still has no address
	if core.set[a] != netip.MustParseAddrPort("192.0.2.1:1") {
		t.Fatalf("a's lookup gave the core %v", core.set[a])
	}
	core.unanswered[a] = false
	step(100*time.Second, "b.test")           // a: 80 s since its last lookup
	step(120*time.Second, "a.test", "b.test") // a's period; b's retry

	// b starts to resolve: one INFO, the core gets the address.
	names.addrs["b.test"] = []netip.Addr{netip.MustParseAddr("2001:db8::2"), netip.MustParseAddr("192.0.2.2")}
	step(130*time.Second, "b.test")
	if core.set[b] != netip.MustParseAddrPort("192.0.2.2:2") {
		t.Fatalf("b resolved to %v (the sockets carry IPv4 only)", core.set[b])
	}
	if logs.FilterMessageSnippet("resolves again").Len() != 1 {
		t.Fatal("no INFO when b resolved again")
	}
	step(139 * time.Second) // resolved: back to the period

	// A name that stops resolving: one WARN in a row, the address kept.
	delete(names.addrs, "a.test")
	core.set = map[crypto.PublicKey]netip.AddrPort{}
	step(220*time.Second, "a.test")
	step(230*time.Second, "a.test", "b.test") // a retried after a tenth; b's period
	if _, told := core.set[a]; logs.FilterLevelExact(zapcore.WarnLevel).Len() != 1 || told {
		t.Fatalf("%d WARNs (want 1), core told %v", logs.FilterLevelExact(zapcore.WarnLevel).Len(), core.set)
	}
	if rs.failed.Load() != 6 || rs.ok.Load() != 4 {
		t.Fatalf("counted %d failed, %d ok", rs.failed.Load(), rs.ok.Load())
	}

	// A changed name starts from the config's lookup; a removed peer is
	// forgotten.
	peers[1].EndpointName.Host = "c.test"
	peers = peers[1:]
	step(240 * time.Second)
	if len(rs.names) != 1 || rs.names[b].name.Host != "c.test" {
		t.Fatalf("names after the reload: %v", rs.names)
	}
}
