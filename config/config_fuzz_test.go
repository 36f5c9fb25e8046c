// Fuzzing of the whole parser, with a test-only writer of configs.

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yip-router/yip-router/crypto"
)

// formatConfig writes c back as a config file (test only): parsing it again
// must give the same config, which checks that every accepted value is
// stored in a form that means what the text said.
func formatConfig(c *Config) string {
	var b strings.Builder
	ic := c.Interface
	fmt.Fprintf(&b, "[Interface]\nName = %s\nPrivateKey = %s\nListenAddress = %s\n",
		ic.Name, ic.PrivateKey, ic.ListenAddress)
	if ic.ListenPort != 0 {
		fmt.Fprintf(&b, "ListenPort = %d\n", ic.ListenPort)
	}
	for _, a := range ic.Addresses {
		fmt.Fprintf(&b, "Address = %s\n", a)
	}
	fmt.Fprintf(&b, "MTU = %d\nFEC = %s\n", ic.MTU, ic.FEC)
	fmt.Fprintf(&b, "Shards = %s\n", ic.Shards)
	if ic.MetricsListen != "" {
		fmt.Fprintf(&b, "MetricsListen = %s\n", ic.MetricsListen)
	}
	fmt.Fprintf(&b, "DisableOffload = %s\nPadding = %s\n", ic.DisableOffload, ic.Padding)
	table := ic.Table.String()
	if ic.Table.Mode == TableID {
		table = ic.Table.Name
	}
	fmt.Fprintf(&b, "Table = %s\nFwMark = %#x\n", table, ic.FwMark)
	for _, h := range []struct {
		key  string
		cmds []string
	}{{"PreUp", ic.Hooks.PreUp}, {"PostUp", ic.Hooks.PostUp}, {"PreDown", ic.Hooks.PreDown}, {"PostDown", ic.Hooks.PostDown}} {
		for _, c := range h.cmds {
			fmt.Fprintf(&b, "%s = %s\n", h.key, c)
		}
	}
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "[Peer]\nPublicKey = %s\n", p.PublicKey)
		if !p.PresharedKey.IsZero() {
			fmt.Fprintf(&b, "PresharedKey = %s\n", p.PresharedKey)
		}
		if p.Endpoint.IsValid() {
			fmt.Fprintf(&b, "Endpoint = %s\n", p.Endpoint)
		}
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "AllowedIPs = %s\n", a)
		}
		fmt.Fprintf(&b, "PersistentKeepalive = %d\n", int(p.PersistentKeepalive.Seconds()))
		if p.LegacyMAC {
			b.WriteString("LegacyMAC = on\n")
		}
	}
	return b.String()
}

// FuzzParseConfig runs every step on arbitrary text, with testOptions in
// place of the file system and the network, and checks that an accepted
// config keeps its promises and survives being written back and parsed
// again.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(testText(f, "[Interface]", "PrivateKey = {PRIV}", "Address = 10.0.0.1/24, fd00::1/64",
		"[Peer]", "PublicKey = {PUB1}", "Endpoint = gw.both:51820", "AllowedIPs = 10.0.0.2/32, fd00::2/128",
		"[Peer]", "PublicKey = {PUB2}", "Endpoint = [2001:db8::2]:1", "AllowedIPs = 10.0.1.0/24", "PersistentKeepalive = off")))
	f.Add([]byte("[Interface]\nPrivateKeyFile = good.key\nMTU=1300\nShards=3\nFEC=4:2\n"))
	f.Add([]byte("[Peer]\nPublicKey = x\n[Bogus]\nMTU\n= 1\n"))
	f.Add([]byte(testText(f, "[Interface]", "PrivateKey = {PRIV}", "Table = vpn", "FwMark = 0xca6c", "Padding = light",
		"PostUp = iptables -A FORWARD -i %i -j ACCEPT; echo up ; echo # done", "PreDown = a", "PostUp = b",
		"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0")))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := build("fuzz.conf", data, testOptions)
		if err != nil {
			if c != nil {
				t.Fatal("config and error both returned")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not a *Error", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) > maxErrors+1 {
				t.Fatalf("%d error lines", len(lines))
			}
			for _, l := range lines {
				if !strings.HasPrefix(l, "fuzz.conf:") || strings.ContainsAny(l, "\r") || !utf8.ValidString(l) {
					t.Fatalf("bad error line %q", l)
				}
			}
			return
		}
		checkValid(t, c)
		text := formatConfig(c)
		c2, _, err := build("again.conf", []byte(text), testOptions)
		if err != nil {
			t.Fatalf("formatted config does not parse: %v\n%s", err, text)
		}
		for i := range c.Peers {
			// The formatted config writes what a name resolved to.
			c.Peers[i].Line, c.Peers[i].EndpointText, c.Peers[i].EndpointName = 0, "", HostPort{}
			c2.Peers[i].Line, c2.Peers[i].EndpointText = 0, ""
		}
		for _, w := range c.Warnings {
			// A name that does not resolve is the only warning; the
			// formatted config has no Endpoint for it.
			if w.Key != "Endpoint" || !strings.HasPrefix(w.File, "fuzz.conf") {
				t.Fatalf("warning %v", w)
			}
		}
		c.Warnings = nil
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip differs:\n%+v\n%+v\n%s", c, c2, text)
		}
	})
}

// checkValid checks the promises an accepted config makes.
func checkValid(t *testing.T, c *Config) {
	t.Helper()
	ic := c.Interface
	if msg := checkIfName(ic.Name); msg != "" {
		t.Fatalf("accepted name: %s", msg)
	}
	if ic.PrivateKey.IsZero() || !ic.ListenAddress.IsValid() {
		t.Fatalf("accepted interface %+v", ic)
	}
	if ic.MTU < minMTU || ic.MTU > MaxMTU {
		t.Fatalf("accepted MTU %d", ic.MTU)
	}
	for _, a := range ic.Addresses {
		if a.Addr().Is6() && ic.MTU < minIPv6MTU {
			t.Fatalf("accepted MTU %d with %s", ic.MTU, a)
		}
	}
	if !ic.Shards.Valid() {
		t.Fatalf("accepted shards %+v", ic.Shards)
	}
	if ic.Table.Mode == TableID && ic.Table.ID == 0 || ic.Table.Mode > TableID {
		t.Fatalf("accepted table %+v", ic.Table)
	}
	for _, l := range [][]string{ic.Hooks.PreUp, ic.Hooks.PostUp, ic.Hooks.PreDown, ic.Hooks.PostDown} {
		for _, c := range l {
			if c == "" || c != strings.TrimSpace(c) || strings.ContainsRune(c, '\n') {
				t.Fatalf("accepted hook %q", c)
			}
		}
	}
	if _, err := ic.PreUpName(); err != nil {
		t.Fatalf("accepted %v", err)
	}
	own := ic.PrivateKey.Public()
	seen := map[crypto.PublicKey]bool{}
	var all []netip.Prefix
	for _, p := range c.Peers {
		if p.PublicKey.IsZero() || p.PublicKey == own || seen[p.PublicKey] {
			t.Fatalf("accepted peer key %s", p.PublicKey)
		}
		seen[p.PublicKey] = true
		if p.Endpoint.IsValid() && p.Endpoint.Port() == 0 || p.Endpoint.Addr().Is4In6() {
			t.Fatalf("accepted endpoint %s", p.Endpoint)
		}
		if p.PersistentKeepalive < 0 || p.PersistentKeepalive.Seconds() > 65535 {
			t.Fatalf("accepted keepalive %s", p.PersistentKeepalive)
		}
		for _, a := range p.AllowedIPs {
			if a != a.Masked() {
				t.Fatalf("unmasked %s", a)
			}
			all = append(all, a)
		}
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if a == b {
				t.Fatalf("accepted %s twice", a)
			}
		}
	}
}
