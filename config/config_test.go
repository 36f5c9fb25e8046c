package config

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// testKey returns a deterministic private key and its text forms.
func testKey(t testing.TB, seed byte) (crypto.PrivateKey, string, string) {
	t.Helper()
	var b [crypto.KeyLen]byte
	for i := range b {
		b[i] = seed + byte(i)
	}
	k, err := crypto.ParsePrivateKey(base64.StdEncoding.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	return k, k.String(), k.Public().String()
}

// testText joins lines (so that line N of the file is lines[N-1]) and
// fills in {PRIV} (our key), {OWNPUB} (its public key), {PUB1}..{PUB3} and
// {PSK}.
func testText(t testing.TB, lines ...string) string {
	t.Helper()
	_, priv, own := testKey(t, 1)
	_, _, p1 := testKey(t, 2)
	_, _, p2 := testKey(t, 3)
	_, _, p3 := testKey(t, 4)
	psk := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	return strings.NewReplacer("{PRIV}", priv, "{OWNPUB}", own, "{PUB1}", p1, "{PUB2}", p2,
		"{PUB3}", p3, "{PSK}", psk).Replace(strings.Join(lines, "\n") + "\n")
}

// fakeLookup resolves *.v4 to 192.0.2.1, *.v6 to 2001:db8::1, *.both to
// both (IPv6 first) and anything else to a lookup error; no network.
func fakeLookup(_ context.Context, host string) ([]netip.Addr, error) {
	switch {
	case strings.HasSuffix(host, ".v4"):
		return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
	case strings.HasSuffix(host, ".v6"):
		return []netip.Addr{netip.MustParseAddr("2001:db8::1")}, nil
	case strings.HasSuffix(host, ".both"):
		return []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:192.0.2.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func testParse(t testing.TB, text string) (*Config, error) {
	t.Helper()
	c, _, err := read("t.conf", strings.NewReader(text), options{lookup: fakeLookup})
	return c, err
}

// checkErrors checks that err has exactly one line per want, in order;
// a want is "PREFIX|SUBSTRING": the line must start with PREFIX (file, line,
// section, key) and contain SUBSTRING.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("error is not a *Error: %T", err)
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d error lines, want %d:\n%s\nwant:\n%s", len(got), len(want), err, strings.Join(want, "\n"))
	}
	for i, w := range want {
		prefix, sub, _ := strings.Cut(w, "|")
		if !strings.HasPrefix(got[i], prefix) || !strings.Contains(got[i][len(prefix):], sub) {
			t.Errorf("error line %d:\n got  %s\n want %s...%s", i+1, got[i], prefix, sub)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	long := strings.Repeat("x", maxLineLen-len("# ")+1)
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"unknown key", []string{"[Interface]", "PrivateKey = {PRIV}", "Foo = 1"},
			[]string{"t.conf:3: [Interface] Foo: |unknown key"}},
		{"unknown odd key is quoted", []string{"[Interface]", "PrivateKey = {PRIV}", "Fo o\x01 = 1"},
			[]string{`t.conf:3: [Interface] "Fo o\x01": |unknown key`}},
		{"peer key in interface", []string{"[Interface]", "PrivateKey = {PRIV}", "publickey = {PUB1}"},
			[]string{"t.conf:3: [Interface] publickey: |unknown key in [Interface] (PublicKey belongs in [Peer])"}},
		{"interface key in peer", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "MTU = 1400"},
			[]string{"t.conf:5: [Peer] MTU: |unknown key in [Peer] (MTU belongs in [Interface])"}},
		{"wg-quick key", []string{"[Interface]", "PrivateKey = {PRIV}", "DNS = 192.0.2.53"},
			[]string{"t.conf:3: [Interface] DNS: |unknown key (a WireGuard/wg-quick key"}},
		{"key outside any section", []string{"mtu = 1400", "[Interface]", "PrivateKey = {PRIV}"},
			[]string{"t.conf:1: MTU: |key outside any section (it belongs under [Interface])"}},
		{"unknown key outside any section", []string{"# c", "Bar = 1", "[Interface]", "PrivateKey = {PRIV}"},
			[]string{"t.conf:2: Bar: |key outside any section (put it under [Interface] or [Peer])"}},
		{"unknown section, its keys ignored", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peeer]", "PublicKey = junk"},
			[]string{"t.conf:3: [Peeer]: |unknown section (want [Interface] or [Peer])"}},
		{"malformed header", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer"},
			[]string{`t.conf:3: |"[Peer" is not a section header`}},
		{"duplicate interface", []string{"[Interface]", "PrivateKey = {PRIV}", "[interface]", "MTU = 1400"},
			[]string{"t.conf:3: [Interface]: |duplicate section (first at line 1)"}},
		{"missing interface", []string{"[Peer]", "PublicKey = {PUB1}"},
			[]string{"t.conf:1: [Interface]: |section is missing"}},
		{"empty file", []string{""},
			[]string{"t.conf:1: [Interface]: |section is missing"}},
		{"duplicate key, case-insensitive", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1400", "mtu = 1300"},
			[]string{"t.conf:4: [Interface] MTU: |duplicate key (first set at line 3)"}},
		{"duplicate peer key", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = 192.0.2.1:1", "ENDPOINT = 192.0.2.1:2"},
			[]string{"t.conf:6: [Peer] Endpoint: |duplicate key (first set at line 5)"}},
		{"not key = value", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU 1400"},
			[]string{`t.conf:3: [Interface]: |not a "Key = Value" line`}},
		{"missing key name", []string{"[Interface]", "PrivateKey = {PRIV}", "= 1400"},
			[]string{"t.conf:3: [Interface]: |missing key name"}},
		{"missing private key", []string{"# x", "[Interface]", "ListenPort = 1"},
			[]string{"t.conf:2: [Interface] PrivateKey: |missing (set PrivateKey or PrivateKeyFile)"}},
		{"both private keys", []string{"[Interface]", "PrivateKey = {PRIV}", "PrivateKeyFile = /nonexistent/key"},
			[]string{"t.conf:3: [Interface] PrivateKeyFile: |both PrivateKey and PrivateKeyFile are set (PrivateKey at line 2)"}},
		{"both private keys, file first", []string{"[Interface]", "PrivateKeyFile = /nonexistent/key", "PrivateKey = {PRIV}"},
			[]string{"t.conf:2: [Interface] PrivateKeyFile: |no such file",
				"t.conf:3: [Interface] PrivateKey: |both PrivateKey and PrivateKeyFile are set (PrivateKeyFile at line 2)"}},
		{"private key bad base64", []string{"[Interface]", "PrivateKey = " + strings.Repeat("!", 43) + "="},
			[]string{"t.conf:2: [Interface] PrivateKey: |private key is not valid base64"}},
		{"private key short", []string{"[Interface]", "PrivateKey = AAAA"},
			[]string{"t.conf:2: [Interface] PrivateKey: |private key must be 44 base64 characters (32 bytes), got 4"}},
		{"private key empty", []string{"[Interface]", "PrivateKey ="},
			[]string{"t.conf:2: [Interface] PrivateKey: |private key is empty"}},
		{"private key zero", []string{"[Interface]", "PrivateKey = " + base64.StdEncoding.EncodeToString(make([]byte, 32))},
			[]string{"t.conf:2: [Interface] PrivateKey: |all zeros"}},
		{"private key unpadded (crypto would panic)", []string{"[Interface]", "PrivateKey = " + strings.Repeat("0", 44)},
			[]string{"t.conf:2: [Interface] PrivateKey: |private key decodes to 33 bytes, want 32"}},
		{"public key unpadded, bad base64", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = " + strings.Repeat("!", 44)},
			[]string{"t.conf:4: [Peer] PublicKey: |public key is not valid base64"}},
		{"preshared key unpadded", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PresharedKey = " + strings.Repeat("A", 44)},
			[]string{"t.conf:5: [Peer] PresharedKey: |preshared key decodes to 33 bytes, want 32"}},
		{"public key bad", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = abc"},
			[]string{"t.conf:4: [Peer] PublicKey: |public key must be 44 base64 characters"}},
		{"public key zero", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = " + base64.StdEncoding.EncodeToString(make([]byte, 32))},
			[]string{"t.conf:4: [Peer] PublicKey: |public key is all zeros"}},
		{"preshared key bad", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PresharedKey = " + strings.Repeat("!", 43) + "="},
			[]string{"t.conf:5: [Peer] PresharedKey: |preshared key is not valid base64"}},
		{"peer without public key", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "AllowedIPs = 10.0.0.0/8"},
			[]string{"t.conf:3: [Peer] PublicKey: |missing (every [Peer] needs one)"}},
		{"own public key", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {OWNPUB}"},
			[]string{"t.conf:4: [Peer] PublicKey: |is this interface's own public key (from PrivateKey at line 2)"}},
		{"duplicate peers", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "[Peer]", "PublicKey = {PUB1}"},
			[]string{"t.conf:6: [Peer] PublicKey: |duplicate peer: same key as the peer at line 3 (PublicKey at line 4)"}},
		{"overlap between peers, inside", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 10.1.2.3/16"},
			[]string{"t.conf:8: [Peer] AllowedIPs: |10.1.0.0/16 is inside 10.0.0.0/8 from line 5 (peer at line 3); AllowedIPs must not overlap"}},
		{"overlap between peers, contains", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 2001:db8:1::/48",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = ::/0"},
			[]string{"t.conf:8: [Peer] AllowedIPs: |::/0 contains 2001:db8:1::/48 from line 5 (peer at line 3)"}},
		{"overlap between peers, equal", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 0.0.0.0/0"},
			[]string{"t.conf:8: [Peer] AllowedIPs: |0.0.0.0/0 is also listed at line 5 (peer at line 3)"}},
		{"overlap within a peer, same line", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = fd00::/64, fd00::1/64"},
			[]string{"t.conf:5: [Peer] AllowedIPs: |fd00::/64 is also listed at line 5 (same peer)"}},
		{"overlap within a peer, two lines", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.1", "AllowedIPs = 10.0.0.0/24"},
			[]string{"t.conf:6: [Peer] AllowedIPs: |10.0.0.0/24 contains 10.0.0.1/32 from line 5 (same peer)"}},
		{"no overlap across families or siblings", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/25, ::/0",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 10.0.0.128/25, 128.0.0.0/1", "MTU = 1"},
			[]string{"t.conf:9: [Peer] MTU: |unknown key"}}, // proves the rest parsed
		{"bad prefixes", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/33, 10.0.0.0/8, fe80::1%eth0, 10.0.0.0/x"},
			[]string{`t.conf:5: [Peer] AllowedIPs: |"10.0.0.0/33" is not a prefix`,
				`t.conf:5: [Peer] AllowedIPs: |"fe80::1%eth0" is not a prefix`,
				`t.conf:5: [Peer] AllowedIPs: |"10.0.0.0/x" is not a prefix`}},
		{"4in6 prefix", []string{"[Interface]", "PrivateKey = {PRIV}", "Address = ::ffff:10.0.0.1/128"},
			[]string{`t.conf:3: [Interface] Address: |"::ffff:10.0.0.1/128" is an IPv4-mapped IPv6 prefix`}},
		{"bad address", []string{"[Interface]", "PrivateKey = {PRIV}", "Address = 10.1.0.1/24, 10.1.0.256/24"},
			[]string{`t.conf:3: [Interface] Address: |"10.1.0.256/24" is not a prefix`}},
		{"duplicate address", []string{"[Interface]", "PrivateKey = {PRIV}", "Address = 10.1.0.1/24", "Address = 10.1.0.1/24"},
			[]string{"t.conf:4: [Interface] Address: |10.1.0.1/24 is listed twice (also at line 3)"}},
		{"listen port 0", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenPort = 0"},
			[]string{`t.conf:3: [Interface] ListenPort: |"0" is not a port (want 1..65535)`}},
		{"listen port big", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenPort = 65536"},
			[]string{`t.conf:3: [Interface] ListenPort: |"65536" is not a port`}},
		{"listen port text", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenPort = +80"},
			[]string{`t.conf:3: [Interface] ListenPort: |"+80" is not a port`}},
		{"listen address", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 192.0.2.300"},
			[]string{`t.conf:3: [Interface] ListenAddress: |"192.0.2.300" is not an IP address`}},
		{"mtu low", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 575"},
			[]string{"t.conf:3: [Interface] MTU: |575 is out of range 576..1576"}},
		{"mtu high", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1577"},
			[]string{"t.conf:3: [Interface] MTU: |1577 is out of range 576..1576"}},
		{"mtu text", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1400b"},
			[]string{`t.conf:3: [Interface] MTU: |"1400b" is not a number`}},
		{"mtu below ipv6 minimum", []string{"[Interface]", "PrivateKey = {PRIV}", "Address = 10.0.0.1/24", "MTU = 1279", "Address = fd00::1/64"},
			[]string{"t.conf:4: [Interface] MTU: |1279 is below 1280, the IPv6 minimum, and Address fd00::1/64 (line 5) is IPv6"}},
		{"shards 0", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = 0"},
			[]string{`t.conf:3: [Interface] Shards: |"0": want auto or a number of shards 1..64`}},
		{"shards 65", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = 65"},
			[]string{`t.conf:3: [Interface] Shards: |"65": want auto`}},
		{"shards text", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = all"},
			[]string{`t.conf:3: [Interface] Shards: |"all": want auto`}},
		{"fec shape", []string{"[Interface]", "PrivateKey = {PRIV}", "FEC = 8"},
			[]string{`t.conf:3: [Interface] FEC: |"8": want off, auto or K:R`}},
		{"fec range", []string{"[Interface]", "PrivateKey = {PRIV}", "FEC = 65:1"},
			[]string{`t.conf:3: [Interface] FEC: |"65:1": K must be 1..64`}},
		{"metrics listen", []string{"[Interface]", "PrivateKey = {PRIV}", "MetricsListen = localhost:9586"},
			[]string{`t.conf:3: [Interface] MetricsListen: |"localhost:9586" is not an address:port`}},
		{"name empty", []string{"[Interface]", "PrivateKey = {PRIV}", "Name ="},
			[]string{"t.conf:3: [Interface] Name: |value is empty"}},
		{"name long", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = abcdefghijklmnop"},
			[]string{`t.conf:3: [Interface] Name: |"abcdefghijklmnop" is longer than 15 bytes`}},
		{"name slash", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = a/b"},
			[]string{`t.conf:3: [Interface] Name: |"a/b" must not contain '/'`}},
		{"name space", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = yip 0"},
			[]string{`t.conf:3: [Interface] Name: |"yip 0": an interface name must be printable ASCII without whitespace`}},
		{"name two patterns", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = y%d%d"},
			[]string{`t.conf:3: [Interface] Name: |"y%d%d" has more than one %d pattern`}},
		{"name bad pattern", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = y%s"},
			[]string{`t.conf:3: [Interface] Name: |"y%s": '%' must be followed by 'd'`}},
		{"name dot", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = .."},
			[]string{`t.conf:3: [Interface] Name: |".." is not a valid interface name`}},
		{"keepalive negative", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PersistentKeepalive = -1"},
			[]string{`t.conf:5: [Peer] PersistentKeepalive: |"-1": want off or seconds 0..65535`}},
		{"keepalive big", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PersistentKeepalive = 65536"},
			[]string{`t.conf:5: [Peer] PersistentKeepalive: |"65536": want off`}},
		{"keepalive text", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PersistentKeepalive = 25s"},
			[]string{`t.conf:5: [Peer] PersistentKeepalive: |"25s": want off`}},
		{"endpoint no port", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = 192.0.2.1"},
			[]string{`t.conf:5: [Peer] Endpoint: |"192.0.2.1" is not host:port`}},
		{"endpoint port 0", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = 192.0.2.1:0"},
			[]string{`t.conf:5: [Peer] Endpoint: |"192.0.2.1:0": port 0 is not allowed`}},
		{"endpoint zone", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [fe80::1%eth0]:51820"},
			[]string{`t.conf:5: [Peer] Endpoint: |"[fe80::1%eth0]:51820": an address with a zone (%eth0) is not supported`}},
		{"endpoint port big", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [2001:db8::1]:70000"},
			[]string{`t.conf:5: [Peer] Endpoint: |"[2001:db8::1]:70000": "70000" is not a port`}},
		{"endpoint unbracketed ipv6", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = 2001:db8::1:51820"},
			[]string{`t.conf:5: [Peer] Endpoint: |"2001:db8::1:51820" is not host:port`}},
		{"endpoint bad host", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = bad_host!:51820"},
			[]string{`t.conf:5: [Peer] Endpoint: |"bad_host!:51820" is not host:port: "bad_host!" is neither an IP address nor a host name`}},
		{"endpoint bad ip", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = 192.0.2.256:51820"},
			[]string{`t.conf:5: [Peer] Endpoint: |"192.0.2.256:51820" is not host:port: "192.0.2.256" is neither`}},
		{"endpoint unresolvable", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "Endpoint = gw.invalid:51820"},
			[]string{`t.conf:5: [Peer] Endpoint: |cannot resolve "gw.invalid": lookup gw.invalid: no such host`}},
		{"endpoint family vs listen address", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 192.0.2.9", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [2001:db8::1]:51820"},
			[]string{"t.conf:6: [Peer] Endpoint: |[2001:db8::1]:51820 is not IPv4 like ListenAddress 192.0.2.9 (line 3)"}},
		{"IPv6 endpoint vs IPv4-only listen", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 0.0.0.0", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [2001:db8::1]:51820"},
			[]string{"t.conf:6: [Peer] Endpoint: |[2001:db8::1]:51820 is not IPv4 like ListenAddress 0.0.0.0 (line 3)"}},
		{"endpoint host family vs listen address", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 2001:db8::9", "[Peer]", "PublicKey = {PUB1}", "Endpoint = gw.v4:51820"},
			[]string{`t.conf:6: [Peer] Endpoint: |"gw.v4" has no IPv6 address to match ListenAddress 2001:db8::9 (line 3)`}},
		{"line too long", []string{"[Interface]", "PrivateKey = {PRIV}", "# " + long},
			[]string{"t.conf:3: |line is longer than 4096 bytes"}},
		{"comment needs whitespace before it", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1400#x"},
			[]string{`t.conf:3: [Interface] MTU: |"1400#x" is not a number`}},
		{"several errors, in line order", []string{"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8", "[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/9", "[Interface]", "MTU = 9000", "Shards = x"},
			[]string{
				"t.conf:5: [Peer] PublicKey: |duplicate peer: same key as the peer at line 1 (PublicKey at line 2)",
				"t.conf:6: [Peer] AllowedIPs: |10.0.0.0/9 is inside 10.0.0.0/8 from line 3 (peer at line 1)",
				"t.conf:7: [Interface] PrivateKey: |missing",
				"t.conf:8: [Interface] MTU: |9000 is out of range",
				`t.conf:9: [Interface] Shards: |"x": want auto`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := testParse(t, testText(t, tc.lines...))
			if c != nil {
				t.Errorf("config returned with an error")
			}
			checkErrors(t, err, tc.want)
		})
	}
}

func TestConfigFull(t *testing.T) {
	text := testText(t,
		"\ufeff# full example, CRLF line ends",
		"  [ interface ]  # comment after a header",
		"name = tun%d",
		"PRIVATEKEY = {PRIV} ; trailing comment",
		"ListenPort=4500",
		"ListenAddress = 2001:db8::10",
		"Address = 10.1.0.1/24,fd00:1::1/64",
		"Address = 10.2.0.1/16,",
		"MTU = 1280",
		"Shards = 4",
		"FEC = 16:4",
		"MetricsListen = [::1]:9586",
		"",
		"\t; full-line comment",
		"[Peer]",
		"PublicKey = {PUB1}",
		"PresharedKey = {PSK}",
		"Endpoint = [2001:db8::2]:51820",
		"AllowedIPs = 10.1.0.2/32, 192.168.10.7/24",
		"AllowedIPs = fd00:1::2/128",
		"PersistentKeepalive = 25",
		"[peer]",
		"publickey = {PUB2}",
		"endpoint = gw.both:4500",
		"persistentkeepalive = OFF",
		"[Peer]",
		"PublicKey = {PUB3}",
		"AllowedIPs =",
		"PersistentKeepalive = 0",
	)
	text = strings.ReplaceAll(text, "\n", "\r\n")
	c, err := testParse(t, text)
	if err != nil {
		t.Fatal(err)
	}
	priv, _, _ := testKey(t, 1)
	k := func(seed byte) crypto.PublicKey { p, _, _ := testKey(t, seed); return p.Public() }
	var psk crypto.PresharedKey
	copy(psk[:], "0123456789abcdef0123456789abcdef")
	pfx := netip.MustParsePrefix
	want := &Config{
		Interface: Interface{
			Name:          "tun%d",
			PrivateKey:    priv,
			ListenPort:    4500,
			ListenAddress: netip.MustParseAddr("2001:db8::10"),
			Addresses:     []netip.Prefix{pfx("10.1.0.1/24"), pfx("fd00:1::1/64"), pfx("10.2.0.1/16")},
			MTU:           1280,
			Shards:        4,
			FEC:           fec.Mode{Kind: fec.ModeFixed, K: 16, R: 4},
			MetricsListen: "[::1]:9586",
		},
		Peers: []Peer{
			{
				Line:                15,
				PublicKey:           k(2),
				PresharedKey:        psk,
				Endpoint:            netip.MustParseAddrPort("[2001:db8::2]:51820"),
				EndpointText:        "[2001:db8::2]:51820",
				AllowedIPs:          []netip.Prefix{pfx("10.1.0.2/32"), pfx("192.168.10.0/24"), pfx("fd00:1::2/128")},
				PersistentKeepalive: 25 * time.Second,
			},
			{
				Line:         22,
				PublicKey:    k(3),
				Endpoint:     netip.MustParseAddrPort("[2001:db8::1]:4500"), // IPv6 to match ListenAddress
				EndpointText: "gw.both:4500",
			},
			{Line: 26, PublicKey: k(4)},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%+v\nwant\n%+v", c, want)
	}
	if p := c.PeerByKey(k(3)); p == nil || p.Line != 22 {
		t.Errorf("PeerByKey(peer 2) = %+v", p)
	}
	if p := c.PeerByKey(k(1)); p != nil {
		t.Errorf("PeerByKey(own key) = %+v, want nil", p)
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Parse("d.conf", strings.NewReader(testText(t, "[Interface]", "PrivateKey = {PRIV}")))
	if err != nil {
		t.Fatal(err)
	}
	ic := c.Interface
	if ic.Name != "yip0" || ic.ListenPort != 0 || ic.ListenAddress != netip.IPv6Unspecified() ||
		ic.MTU != DefaultMTU || !ic.ShardsAuto || ic.Shards != 0 || ic.FEC != (fec.Mode{Kind: fec.ModeAuto}) ||
		ic.MetricsListen != "" || ic.Addresses != nil || c.Peers != nil || c.Path != "" {
		t.Errorf("defaults: %+v", c)
	}
}

// TestConfigMTUConstants pins the derivation documented in docs/CONFIG.md.
func TestConfigMTUConstants(t *testing.T) {
	fecLenPrefix := fec.MaxParityLen - fec.MaxSymbolLen
	parity := crypto.FrameOverhead + fecLenPrefix + crypto.SymbolOverhead
	if parity != 42 {
		t.Errorf("parity datagram overhead = %d, docs say 42", parity)
	}
	if want := 1500 - 40 - 8 - parity; DefaultMTU != want {
		t.Errorf("DefaultMTU = %d, want %d", DefaultMTU, want)
	}
	if MaxMTU != 1576 || MaxMTU+crypto.SymbolOverhead != fec.MaxSymbolLen {
		t.Errorf("MaxMTU = %d", MaxMTU)
	}
}

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

func TestConfigTooLarge(t *testing.T) {
	big := testText(t, "[Interface]", "PrivateKey = {PRIV}") + strings.Repeat("# padding line\n", maxFileSize/15+1)
	_, err := Parse("big.conf", strings.NewReader(big))
	want := strconv.Itoa(strings.Count(big[:maxFileSize], "\n") + 1)
	checkErrors(t, err, []string{"big.conf:" + want + ": |file is larger than 1 MiB"})

	// Exactly at the limit is fine.
	ok := testText(t, "[Interface]", "PrivateKey = {PRIV}")
	ok += strings.Repeat("#\n", (maxFileSize-len(ok))/2)
	ok += strings.Repeat("#", maxFileSize-len(ok))
	if len(ok) != maxFileSize {
		t.Fatal(len(ok))
	}
	if _, err := Parse("ok.conf", strings.NewReader(ok)); err != nil {
		t.Errorf("1 MiB file: %v", err)
	}
}

func TestConfigErrorCap(t *testing.T) {
	lines := []string{"[Interface]", "PrivateKey = {PRIV}"}
	for range 30 {
		lines = append(lines, "Bogus = 1")
	}
	_, err := testParse(t, testText(t, lines...))
	var want []string
	for i := range maxErrors {
		want = append(want, fmt.Sprintf("t.conf:%d: [Interface] Bogus: |unknown key", i+3))
	}
	want = append(want, "t.conf:23: |too many errors: 10 more not shown")
	checkErrors(t, err, want)
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 21 {
		t.Errorf("Unwrap gives %d errors", n)
	}
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestConfigReadError(t *testing.T) {
	_, err := Parse("r.conf", failReader{})
	checkErrors(t, err, []string{"r.conf: |read: disk on fire"})
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	priv, privText, _ := testKey(t, 1)
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys", "a.key"), []byte(privText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.key"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(testText(t, lines...)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Relative to the config file's directory, not the current one.
	p := write("gw.conf", "[Interface]", "PrivateKeyFile = keys/a.key")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || c.Interface.PrivateKey != priv {
		t.Errorf("Path %q, key %v", c.Path, c.Interface.PrivateKey)
	}
	// Through Parse an absolute path works.
	if _, err := Parse("x.conf", strings.NewReader("[Interface]\nPrivateKeyFile = "+filepath.Join(dir, "keys/a.key"))); err != nil {
		t.Error(err)
	}

	p = write("own.conf", "[Interface]", "PrivateKeyFile = keys/a.key", "[Peer]", "PublicKey = {OWNPUB}")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":4: [Peer] PublicKey: |is this interface's own public key (from PrivateKeyFile at line 2)"})

	p = write("bad.conf", "[Interface]", "PrivateKeyFile = bad.key")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |" + strconv.Quote(filepath.Join(dir, "bad.key")) + ": private key must be 44 base64 characters"})

	p = write("missing.conf", "[Interface]", "PrivateKeyFile = nope.key")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |" + strconv.Quote(filepath.Join(dir, "nope.key")) + ": open: no such file or directory"})

	p = write("dir.conf", "[Interface]", "PrivateKeyFile = keys")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |not a regular file"})

	_, err = Load(filepath.Join(dir, "absent.conf"))
	checkErrors(t, err, []string{filepath.Join(dir, "absent.conf") + ": |open: no such file or directory"})
	_, err = Load(dir)
	checkErrors(t, err, []string{dir + ": |is a directory"})
}

// TestConfigExamples: the shipped examples parse and are a matching pair.
func TestConfigExamples(t *testing.T) {
	a, err := Load("../examples/gw-a.conf")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load("../examples/gw-b.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]*Config{{a, b}, {b, a}} {
		me, other := pair[0], pair[1]
		if len(me.Peers) != 1 {
			t.Fatalf("%s: %d peers", me.Path, len(me.Peers))
		}
		peer := me.PeerByKey(other.Interface.PrivateKey.Public())
		if peer == nil {
			t.Fatalf("%s: no peer with %s's public key", me.Path, other.Path)
		}
		if peer.PresharedKey != other.Peers[0].PresharedKey {
			t.Errorf("%s: PresharedKey differs from %s", me.Path, other.Path)
		}
		for _, a := range other.Interface.Addresses {
			host := netip.PrefixFrom(a.Addr(), a.Addr().BitLen())
			found := false
			for _, pf := range peer.AllowedIPs {
				found = found || pf.Contains(host.Addr())
			}
			if !found {
				t.Errorf("%s: peer AllowedIPs %v miss %s's address %s", me.Path, peer.AllowedIPs, other.Path, a)
			}
		}
		if peer.Endpoint.Port() != other.Interface.ListenPort {
			t.Errorf("%s: endpoint %v, %s listens on %d", me.Path, peer.Endpoint, other.Path, other.Interface.ListenPort)
		}
	}
}

// TestConfigErrorFormat covers the parts left out when empty.
func TestConfigErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "f", Line: 7, Section: "Peer", Key: "AllowedIPs", Msg: "m"}, "f:7: [Peer] AllowedIPs: m"},
		{Error{File: "f", Line: 7, Section: "Peer", Msg: "m"}, "f:7: [Peer]: m"},
		{Error{File: "f", Line: 7, Key: "MTU", Msg: "m"}, "f:7: MTU: m"},
		{Error{File: "f", Msg: "m"}, "f: m"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// Files holding keys are listed, and named when group or others can read
// them.
func TestExposedSecretFiles(t *testing.T) {
	dir := t.TempDir()
	k, _ := crypto.GeneratePrivateKey()
	keyFile := filepath.Join(dir, "private.key")
	if err := os.WriteFile(keyFile, []byte(k.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := crypto.GeneratePrivateKey()
	conf := filepath.Join(dir, "yip0.conf")
	text := "[Interface]\nPrivateKeyFile = private.key\n\n[Peer]\nPublicKey = " + p.Public().String() +
		"\nPresharedKey = " + k.String() + "\nAllowedIPs = 10.0.0.2/32\n"
	if err := os.WriteFile(conf, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	got := c.ExposedSecretFiles()
	if len(got) != 2 || !strings.HasPrefix(got[0], keyFile) || !strings.HasPrefix(got[1], conf) {
		t.Fatalf("exposed: %q", got)
	}
	for _, f := range []string{keyFile, conf} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.ExposedSecretFiles(); len(got) != 0 {
		t.Fatalf("0600 files reported: %q", got)
	}
}
