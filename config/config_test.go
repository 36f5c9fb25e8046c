// Shared test helpers, and tests of Load and Parse as a whole: a full
// config, defaults, limits and how the steps' errors come out.

package config

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
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

// fakeReadKey stands in for PrivateKeyFile reads: a path that contains
// "good" holds the key of testKey(1) ({PRIV}), any other is missing.
func fakeReadKey(path string) ([]byte, error) {
	if strings.Contains(path, "good") {
		return []byte("AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=\n"), nil
	}
	return nil, errors.New("no such file")
}

// fakeTables stands in for rt_tables: vpn is table 200.
func fakeTables() (map[string]uint32, error) { return map[string]uint32{"vpn": 200}, nil }

// testOptions make every step hermetic: no file system, no network.
var testOptions = options{lookup: fakeLookup, readKey: fakeReadKey, tables: fakeTables}

// testParse runs every step on text as Parse does, with testOptions.
func testParse(t testing.TB, text string) (*Config, error) {
	t.Helper()
	c, _, err := read("t.conf", strings.NewReader(text), testOptions)
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
			Shards:        Shards{N: 4},
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
				EndpointName: HostPort{"gw.both", 4500},
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
		ic.MTU != DefaultMTU || ic.Shards != (Shards{Auto: true}) || ic.FEC != (fec.Mode{Kind: fec.ModeAuto}) ||
		ic.MetricsListen != "" || ic.Addresses != nil || c.Peers != nil || c.Path != "" ||
		ic.Padding != PaddingOff || ic.TunMTU() != DefaultMTU ||
		ic.Table != (Table{Mode: TableAuto}) || ic.FwMark != 0 || !ic.Hooks.Empty() {
		t.Errorf("defaults: %+v", c)
	}
}

// Padding takes its headroom from the TUN MTU, not from the MTU the
// underlay budget was set for; values are case-insensitive.
func TestConfigPadding(t *testing.T) {
	for v, want := range map[string]Padding{"off": PaddingOff, "Light": PaddingLight, "FULL": PaddingFull} {
		c, err := Parse("p.conf", strings.NewReader(testText(t, "[Interface]", "PrivateKey = {PRIV}", "MTU = 1400", "Padding = "+v)))
		if err != nil {
			t.Fatal(err)
		}
		mtu := 1400
		if want != PaddingOff {
			mtu -= crypto.PadHeadroom
		}
		if ic := c.Interface; ic.Padding != want || ic.MTU != 1400 || ic.TunMTU() != mtu {
			t.Errorf("Padding = %s: %v, MTU %d, TUN MTU %d", v, ic.Padding, ic.MTU, ic.TunMTU())
		}
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

// The cap keeps the lowest lines, whichever step found them: a key file's
// problem (found after the text's) on line 2 is shown, and the "too many"
// message points at the first line left out.
func TestConfigErrorCapKeepsLowestLines(t *testing.T) {
	lines := []string{"[Interface]", "PrivateKeyFile = missing.key"}
	for range 30 {
		lines = append(lines, "Bogus = 1")
	}
	_, err := testParse(t, testText(t, lines...))
	want := []string{"t.conf:2: [Interface] PrivateKeyFile: |"}
	for i := range maxErrors - 1 {
		want = append(want, fmt.Sprintf("t.conf:%d: [Interface] Bogus: |unknown key", i+3))
	}
	want = append(want, "t.conf:22: |too many errors: 11 more not shown")
	checkErrors(t, err, want)
}

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestConfigReadError(t *testing.T) {
	_, err := Parse("r.conf", failReader{})
	checkErrors(t, err, []string{"r.conf: |read: disk on fire"})
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

// Parse reports the problems of every step in one error, sorted by line: a
// key file that cannot be read, text errors and a duplicate peer (a failed
// lookup is a warning: TestResolveStep).
func TestConfigAllStepsOneReport(t *testing.T) {
	_, err := testParse(t, testText(t,
		"[Interface]",
		"PrivateKeyFile = missing.key",
		"PrivateKey = {PRIV}",
		"MTU = x",
		"[Peer]",
		"PublicKey = {PUB1}",
		"Endpoint = gw.invalid:51820",
		"[Peer]",
		"PublicKey = {PUB1}",
	))
	checkErrors(t, err, []string{
		`t.conf:2: [Interface] PrivateKeyFile: |"missing.key": no such file`,
		"t.conf:3: [Interface] PrivateKey: |both PrivateKey and PrivateKeyFile are set (PrivateKeyFile at line 2)",
		`t.conf:4: [Interface] MTU: |"x" is not a number`,
		"t.conf:9: [Peer] PublicKey: |duplicate peer: same key as the peer at line 5 (PublicKey at line 6)",
	})
}

// The readKey and resolve steps do no I/O when the config holds its key
// and only IP endpoints.
func TestConfigStepsWithoutIO(t *testing.T) {
	opt := options{
		readKey: func(path string) ([]byte, error) {
			t.Fatalf("key file %q read", path)
			return nil, nil
		},
		lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			t.Fatalf("%q looked up", host)
			return nil, nil
		},
		tables: func() (map[string]uint32, error) {
			t.Fatal("rt_tables read")
			return nil, nil
		},
	}
	text := testText(t, "[Interface]", "PrivateKey = {PRIV}", "Table = main", "[Peer]", "PublicKey = {PUB1}",
		"Endpoint = 192.0.2.1:51820", "[Peer]", "PublicKey = {PUB2}")
	c, src, err := build("t.conf", []byte(text), opt)
	if err != nil {
		t.Fatal(err)
	}
	if c.Peers[0].Endpoint != netip.MustParseAddrPort("192.0.2.1:51820") || !src.inline || src.files != nil {
		t.Errorf("config %+v, key sources %+v", c, src)
	}
}
