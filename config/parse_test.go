// Tests of the parse step: the message for each problem in the text, and
// that the step leaves the key file and host names to the later steps.

package config

import (
	"context"
	"encoding/base64"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

// TestConfigErrors: each problem in the text gives its message, at its
// line, section and key.
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
		{"wg-quick DNS names the alternative", []string{"[Interface]", "PrivateKey = {PRIV}", "DNS = 192.0.2.53"},
			[]string{"t.conf:3: [Interface] DNS: |unknown key (wg-quick's DNS: yip-router does not set the resolver; set it with resolvectl or resolvconf in PostUp, e.g. PostUp = resolvectl dns %i 192.0.2.53)"}},
		{"wg-quick SaveConfig names the alternative", []string{"[Interface]", "PrivateKey = {PRIV}", "saveconfig = true"},
			[]string{"t.conf:3: [Interface] saveconfig: |unknown key (wg-quick's SaveConfig: yip-router never rewrites its config; edit the file and reload (systemctl reload, or SIGHUP))"}},
		{"hook in [Peer]", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PostUp = true"},
			[]string{"t.conf:5: [Peer] PostUp: |unknown key in [Peer] (PostUp belongs in [Interface])"}},
		{"hook empty", []string{"[Interface]", "PrivateKey = {PRIV}", "PreDown =  # nothing"},
			[]string{"t.conf:3: [Interface] PreDown: |value is empty (want a shell command)"}},
		{"%i in PreUp with a name pattern", []string{"[Interface]", "PrivateKey = {PRIV}", "Name = yip%d", "PreUp = true", "PreUp = echo %i", "PostUp = echo %i"},
			[]string{`t.conf:5: [Interface] PreUp: |%i in PreUp: the interface name "yip%d" is a pattern the kernel fills in when it creates the device, after PreUp; name the interface, or leave %i out of PreUp (Name at line 3)`}},
		{"table zero", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = 0"},
			[]string{`t.conf:3: [Interface] Table: |"0": want auto, off, a table number 1..4294967295 or a name from rt_tables`}},
		{"table too large", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = 4294967296"},
			[]string{`t.conf:3: [Interface] Table: |"4294967296": want auto`}},
		{"table not a name", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = my table"},
			[]string{`t.conf:3: [Interface] Table: |"my table": want auto`}},
		{"table digits then letters", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = 12ab"},
			[]string{`t.conf:3: [Interface] Table: |"12ab": want auto`}},
		{"table name not in rt_tables", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = nosuch"},
			[]string{`t.conf:3: [Interface] Table: |"nosuch" is no table name in rt_tables; write the table's number, or auto or off`}},
		{"table twice", []string{"[Interface]", "PrivateKey = {PRIV}", "Table = off", "Table = 7"},
			[]string{"t.conf:4: [Interface] Table: |duplicate key (first set at line 3)"}},
		{"fwmark negative", []string{"[Interface]", "PrivateKey = {PRIV}", "FwMark = -1"},
			[]string{`t.conf:3: [Interface] FwMark: |"-1": want off or a 32-bit mark, decimal or 0x hexadecimal`}},
		{"fwmark too large", []string{"[Interface]", "PrivateKey = {PRIV}", "FwMark = 0x100000000"},
			[]string{`t.conf:3: [Interface] FwMark: |"0x100000000": want off`}},
		{"fwmark bare 0x", []string{"[Interface]", "PrivateKey = {PRIV}", "FwMark = 0x"},
			[]string{`t.conf:3: [Interface] FwMark: |"0x": want off`}},
		{"fwmark octal is not a thing", []string{"[Interface]", "PrivateKey = {PRIV}", "FwMark = 0o17"},
			[]string{`t.conf:3: [Interface] FwMark: |"0o17": want off`}},
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
		{"overlap between peers, equal", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 0.0.0.0/0"},
			[]string{"t.conf:8: [Peer] AllowedIPs: |0.0.0.0/0 is also listed at line 5 (peer at line 3); a prefix belongs to one peer"}},
		{"overlap within a peer, same line", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = fd00::/64, fd00::1/64"},
			[]string{"t.conf:5: [Peer] AllowedIPs: |fd00::/64 is also listed at line 5 (same peer)"}},
		{"nested prefixes are fine: the longest wins", []string{"[Interface]", "PrivateKey = {PRIV}",
			"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8, ::/0", "AllowedIPs = 10.9.0.1",
			"[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 10.1.0.0/16, 2001:db8:1::/48", "MTU = 1"},
			[]string{"t.conf:10: [Peer] MTU: |unknown key"}}, // proves the rest parsed
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
		{"padding value", []string{"[Interface]", "PrivateKey = {PRIV}", "Padding = heavy"},
			[]string{`t.conf:3: [Interface] Padding: |"heavy": want off, light or full`}},
		{"padding below ipv6 minimum", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1300", "Address = fd00::1/64", "Padding = light"},
			[]string{"t.conf:5: [Interface] Padding: |light takes 32 bytes from MTU 1300, leaving 1268, below 1280, the IPv6 minimum, and Address fd00::1/64 (line 4) is IPv6 (raise MTU)"}},
		{"padding below minimum", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 600", "Padding = full"},
			[]string{"t.conf:4: [Interface] Padding: |full takes 32 bytes from MTU 600, leaving 568, below 576 (raise MTU)"}},
		{"shards 0", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = 0"},
			[]string{`t.conf:3: [Interface] Shards: |"0": want auto or a number of shards 1..64`}},
		{"shards 65", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = 65"},
			[]string{`t.conf:3: [Interface] Shards: |"65": want auto`}},
		{"shards text", []string{"[Interface]", "PrivateKey = {PRIV}", "Shards = all"},
			[]string{`t.conf:3: [Interface] Shards: |"all": want auto`}},
		{"fec shape", []string{"[Interface]", "PrivateKey = {PRIV}", "FEC = 8"},
			[]string{`t.conf:3: [Interface] FEC: |"8": want off, auto or K:R`}},
		{"fec range", []string{"[Interface]", "PrivateKey = {PRIV}", "FEC = 193:1"},
			[]string{`t.conf:3: [Interface] FEC: |"193:1": K must be 1..192`}},
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
		{"endpoint family vs listen address", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 192.0.2.9", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [2001:db8::1]:51820"},
			[]string{"t.conf:6: [Peer] Endpoint: |[2001:db8::1]:51820 is not IPv4 like ListenAddress 192.0.2.9 (line 3)"}},
		{"IPv6 endpoint vs IPv4-only listen", []string{"[Interface]", "PrivateKey = {PRIV}", "ListenAddress = 0.0.0.0", "[Peer]", "PublicKey = {PUB1}", "Endpoint = [2001:db8::1]:51820"},
			[]string{"t.conf:6: [Peer] Endpoint: |[2001:db8::1]:51820 is not IPv4 like ListenAddress 0.0.0.0 (line 3)"}},
		{"line too long", []string{"[Interface]", "PrivateKey = {PRIV}", "# " + long},
			[]string{"t.conf:3: |line is longer than 4096 bytes"}},
		{"LegacyMAC bad value", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "PresharedKey = {PSK}", "LegacyMAC = yes"},
			[]string{`t.conf:6: [Peer] LegacyMAC: |"yes": want on or off`}},
		{"LegacyMAC without PresharedKey", []string{"[Interface]", "PrivateKey = {PRIV}", "[Peer]", "PublicKey = {PUB1}", "legacymac = ON"},
			[]string{"t.conf:5: [Peer] LegacyMAC: |on without a PresharedKey"}},
		{"comment needs whitespace before it", []string{"[Interface]", "PrivateKey = {PRIV}", "MTU = 1400#x"},
			[]string{`t.conf:3: [Interface] MTU: |"1400#x" is not a number`}},
		{"several errors, in line order", []string{"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8", "[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/9", "[Interface]", "MTU = 9000", "Shards = x"},
			[]string{
				"t.conf:5: [Peer] PublicKey: |duplicate peer: same key as the peer at line 1 (PublicKey at line 2)",
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

// The parse step does no I/O: it keeps the PrivateKeyFile path and the
// Endpoint host name as written (the key file here does not exist and the
// host does not resolve), and only the readKey and resolve steps use the
// key reader and lookup they are given.
func TestParseDoesNoIO(t *testing.T) {
	text := testText(t, "[Interface]", "PrivateKeyFile = keys/good.key",
		"[Peer]", "PublicKey = {PUB1}", "Endpoint = gw.v4:51820",
		"[Peer]", "PublicKey = {PUB2}", "Endpoint = 192.0.2.7:9")
	p := parse("t.conf", []byte(text))
	if len(p.errs) != 0 {
		t.Fatalf("parse: %v", p.errs)
	}
	if p.keyPath != "keys/good.key" || p.keyLine != 2 || p.privOK || !p.iface.PrivateKey.IsZero() || p.keys.files != nil {
		t.Errorf("after parse: key file %q at line %d, key set %v", p.keyPath, p.keyLine, p.privOK)
	}
	if ps := p.peers[0]; ps.EndpointName != (HostPort{"gw.v4", 51820}) || ps.Endpoint.IsValid() || ps.EndpointText != "gw.v4:51820" {
		t.Errorf("after parse: name %v endpoint %v (%q)", ps.EndpointName, ps.Endpoint, ps.EndpointText)
	}
	if ep := p.peers[1].Endpoint; ep != netip.MustParseAddrPort("192.0.2.7:9") {
		t.Errorf("IP endpoint %v", ep)
	}

	var reads, lookups []string
	p.readKey("/etc/yip", func(path string) ([]byte, error) {
		reads = append(reads, path)
		return fakeReadKey(path)
	})
	p.resolve(func(ctx context.Context, host string) ([]netip.Addr, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("lookup without a deadline")
		}
		lookups = append(lookups, host)
		return fakeLookup(ctx, host)
	})
	c, err := p.finish()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reads, []string{"/etc/yip/keys/good.key"}) || !slices.Equal(lookups, []string{"gw.v4"}) {
		t.Errorf("reads %q, lookups %q", reads, lookups)
	}
	if priv, _, _ := testKey(t, 1); c.Interface.PrivateKey != priv {
		t.Error("private key not from the key file")
	}
	if ep := c.Peers[0].Endpoint; ep != netip.MustParseAddrPort("192.0.2.1:51820") {
		t.Errorf("resolved endpoint %v", ep)
	}
	if !slices.Equal(p.keys.files, []string{"/etc/yip/keys/good.key"}) || p.keys.inline {
		t.Errorf("key sources %+v", p.keys)
	}
}

// LegacyMAC parses, and the handshake keys (distinct PresharedKeys, plus
// one for peers without one or with LegacyMAC) are bounded by
// crypto.MaxHandshakeKeys: the error names the peer that goes over.
func TestConfigHandshakeKeys(t *testing.T) {
	peers := func(n int, extra ...string) []string {
		lines := []string{"[Interface]", "PrivateKey = {PRIV}"}
		for i := range n {
			_, _, pub := testKey(t, byte(10+i))
			psk := base64.StdEncoding.EncodeToString(append([]byte("psk-of-peer-number-"), strings.Repeat(string(rune('a'+i)), 13)...))
			lines = append(lines, "[Peer]", "PublicKey = "+pub, "PresharedKey = "+psk)
		}
		return append(lines, extra...)
	}
	c, err := testParse(t, testText(t, peers(crypto.MaxHandshakeKeys-2, "[Peer]", "PublicKey = {PUB1}", "PresharedKey = {PSK}", "LegacyMAC = on")...))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Peers[len(c.Peers)-1]; !p.LegacyMAC || c.Peers[0].LegacyMAC {
		t.Fatalf("LegacyMAC: %v, %v", p.LegacyMAC, c.Peers[0].LegacyMAC)
	}
	// One more key: the LegacyMAC peer's public-key-only form is the
	// (n+1)th. (Its PSK is no key of its own.)
	n := crypto.MaxHandshakeKeys
	lines := peers(n, "[Peer]", "PublicKey = {PUB1}", "PresharedKey = {PSK}", "LegacyMAC = on")
	_, err = testParse(t, testText(t, lines...))
	checkErrors(t, err, []string{"t.conf:" + strconv.Itoa(len(lines)) + ": [Peer] LegacyMAC: |more than " + strconv.Itoa(n) + " handshake keys"})
	lines = peers(n + 1)
	_, err = testParse(t, testText(t, lines...))
	checkErrors(t, err, []string{"t.conf:" + strconv.Itoa(len(lines)) + ": [Peer] PresharedKey: |more than " + strconv.Itoa(n) + " handshake keys"})
}
