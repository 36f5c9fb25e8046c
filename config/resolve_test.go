// Tests of the resolve step: which address a host name gives and the
// messages when it gives none.

package config

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestConfigEndpointResolution(t *testing.T) {
	for _, tc := range []struct{ listen, host, want string }{
		{"", "gw.both", "192.0.2.1:7"},   // IPv4 preferred, 4in6 unmapped
		{"", "gw.v6", "[2001:db8::1]:7"}, // the default carries both families
		{"::", "gw.v4", "192.0.2.1:7"},
		{"2001:db8::5", "gw.both", "[2001:db8::1]:7"},
		{"192.0.2.5", "gw.both", "192.0.2.1:7"},
	} {
		lines := []string{"[Interface]", "PrivateKey = {PRIV}"}
		if tc.listen != "" {
			lines = append(lines, "ListenAddress = "+tc.listen)
		}
		lines = append(lines, "[Peer]", "PublicKey = {PUB1}", "Endpoint = "+tc.host+":7")
		c, err := testParse(t, testText(t, lines...))
		if err != nil {
			t.Errorf("%s via %s: %v", tc.host, tc.listen, err)
			continue
		}
		if got := c.Peers[0].Endpoint.String(); got != tc.want {
			t.Errorf("%s via %q: endpoint %s, want %s", tc.host, tc.listen, got, tc.want)
		}
	}
}

// TestConfigResolveLocalhost goes through net.DefaultResolver (hosts file).
func TestConfigResolveLocalhost(t *testing.T) {
	if _, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost"); err != nil {
		t.Skip("localhost does not resolve here:", err)
	}
	c, err := Parse("l.conf", strings.NewReader(testText(t,
		"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = localhost:51820")))
	if err != nil {
		t.Fatal(err)
	}
	if ep := c.Peers[0].Endpoint; !ep.Addr().IsLoopback() || ep.Port() != 51820 || c.Peers[0].EndpointText != "localhost:51820" {
		t.Errorf("endpoint %v (%q)", ep, c.Peers[0].EndpointText)
	}
}

// The resolve step warns about a host name that gives no usable address,
// at the Endpoint line; the config loads, the peer without an address but
// with its name, for the router to look up again.
func TestResolveStep(t *testing.T) {
	empty := func(context.Context, string) ([]netip.Addr, error) { return nil, nil }
	for _, tc := range []struct {
		name, listen, host string
		lookup             Lookup
		want               string
	}{
		{"lookup fails", "", "gw.invalid", fakeLookup,
			`t.conf:6: [Peer] Endpoint: |cannot resolve "gw.invalid": lookup gw.invalid: no such host; the peer has no address until`},
		{"no address", "", "gw.example", empty,
			`t.conf:6: [Peer] Endpoint: |"gw.example" resolves to no IP address; the peer has no address until`},
		{"no IPv6 address", "2001:db8::9", "gw.v4", fakeLookup,
			`t.conf:6: [Peer] Endpoint: |"gw.v4" has no IPv6 address to match ListenAddress 2001:db8::9 (line 3); the peer has no address until`},
		{"no IPv4 address", "0.0.0.0", "gw.v6", fakeLookup,
			`t.conf:6: [Peer] Endpoint: |"gw.v6" has no IPv4 address to match ListenAddress 0.0.0.0 (line 3); the peer has no address until`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := "# no ListenAddress"
			if tc.listen != "" {
				listen = "ListenAddress = " + tc.listen
			}
			p := parse("t.conf", []byte(testText(t, "[Interface]", "PrivateKey = {PRIV}", listen,
				"[Peer]", "PublicKey = {PUB1}", "Endpoint = "+tc.host+":51820")))
			if len(p.errs) != 0 {
				t.Fatalf("parse: %v", p.errs)
			}
			p.resolve(tc.lookup)
			c, err := p.finish()
			if err != nil {
				t.Fatalf("a name that does not resolve stopped the config: %v", err)
			}
			if len(c.Warnings) != 1 {
				t.Fatalf("warnings %v, want one", c.Warnings)
			}
			msg, prefix, _ := strings.Cut(tc.want, "|")
			if got := c.Warnings[0].Error(); !strings.HasPrefix(got, msg+prefix) {
				t.Errorf("warning\n%s\nwant it to start with\n%s", got, msg+prefix)
			}
			pc := c.Peers[0]
			if pc.Endpoint.IsValid() || pc.EndpointName != (HostPort{tc.host, 51820}) {
				t.Errorf("peer endpoint %v, name %v", pc.Endpoint, pc.EndpointName)
			}
		})
	}
}

// With as many errors as can be shown, host names are not looked up.
func TestResolveSkippedPastErrorCap(t *testing.T) {
	lines := []string{"[Interface]", "PrivateKey = {PRIV}"}
	for range maxErrors {
		lines = append(lines, "Bogus = 1")
	}
	lines = append(lines, "[Peer]", "PublicKey = {PUB1}", "Endpoint = gw.v4:51820")
	p := parse("t.conf", []byte(testText(t, lines...)))
	p.resolve(func(_ context.Context, host string) ([]netip.Addr, error) {
		t.Errorf("%q looked up", host)
		return nil, nil
	})
	if _, err := p.finish(); err == nil {
		t.Fatal("no error")
	}
}
