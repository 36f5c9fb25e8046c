// Tests of the wg-quick keys: Table, FwMark and the hooks, and what
// FullTunnel makes of a default route.

package config

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestConfigTable(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want Table
		str  string
	}{
		{"auto", Table{Mode: TableAuto}, "auto"},
		{"AUTO", Table{Mode: TableAuto}, "auto"},
		{"off", Table{Mode: TableOff}, "off"},
		{"main", Table{Mode: TableID, ID: 254, Name: "main"}, "main (254)"},
		{"Main", Table{Mode: TableID, ID: 254, Name: "main"}, "main (254)"},
		{"1234", Table{Mode: TableID, ID: 1234, Name: "1234"}, "1234"},
		{"4294967295", Table{Mode: TableID, ID: 4294967295, Name: "4294967295"}, "4294967295"},
		{"vpn", Table{Mode: TableID, ID: 200, Name: "vpn"}, "vpn (200)"},
	} {
		c, err := testParse(t, testText(t, "[Interface]", "PrivateKey = {PRIV}", "Table = "+tc.v))
		if err != nil {
			t.Fatalf("Table = %s: %v", tc.v, err)
		}
		if got := c.Interface.Table; got != tc.want || got.String() != tc.str {
			t.Errorf("Table = %s: %+v %q, want %+v %q", tc.v, got, got.String(), tc.want, tc.str)
		}
	}
	if !(Table{Mode: TableID, ID: 254, Name: "main"}).Same(Table{Mode: TableID, ID: 254, Name: "254"}) ||
		(Table{Mode: TableID, ID: 254}).Same(Table{Mode: TableAuto}) {
		t.Error("Same compares names or ignores modes")
	}
	// A name needs rt_tables; when it cannot be read the message says
	// to write the number.
	_, _, err := build("t.conf", []byte(testText(t, "[Interface]", "PrivateKey = {PRIV}", "Table = vpn")),
		options{lookup: fakeLookup, readKey: fakeReadKey, tables: func() (map[string]uint32, error) {
			return nil, errors.New("no rt_tables file")
		}})
	checkErrors(t, err, []string{`t.conf:3: [Interface] Table: |"vpn": cannot read the table names (no rt_tables file); write the table's number`})
}

// rt_tables lines are "number name", '#' comments, numbers as ip reads
// them (0x allowed); later files override earlier names.
func TestParseRTTables(t *testing.T) {
	names := map[string]uint32{}
	parseRTTables([]byte("#\n# reserved values\n255\tlocal\n254 main # the main one\n0 unspec\n0x10 hex\nbogus line\n200 vpn\n"), names)
	parseRTTables([]byte("201 vpn\n"), names)
	want := map[string]uint32{"local": 255, "main": 254, "hex": 16, "vpn": 201}
	if len(names) != len(want) {
		t.Fatalf("%v", names)
	}
	for k, v := range want {
		if names[k] != v {
			t.Errorf("%s = %d, want %d (%v)", k, names[k], v, names)
		}
	}
}

func TestConfigFwMark(t *testing.T) {
	for v, want := range map[string]uint32{"off": 0, "OFF": 0, "0": 0, "51820": 51820, "0xca6c": 0xca6c, "0XCA6C": 0xca6c, "4294967295": 0xffffffff, "0xffffffff": 0xffffffff} {
		c, err := testParse(t, testText(t, "[Interface]", "PrivateKey = {PRIV}", "FwMark = "+v))
		if err != nil {
			t.Fatalf("FwMark = %s: %v", v, err)
		}
		if c.Interface.FwMark != want {
			t.Errorf("FwMark = %s: %#x, want %#x", v, c.Interface.FwMark, want)
		}
	}
}

// Hooks accumulate in order; in their lines only '#' after a space starts
// a comment, so a shell's ';' and a '#' inside a word stay; %i is kept for
// the router to replace.
func TestConfigHooks(t *testing.T) {
	c, err := testParse(t, testText(t, "[Interface]", "PrivateKey = {PRIV}",
		"PreUp = modprobe tun",
		"PostUp = iptables -A FORWARD -i %i -j ACCEPT; iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE",
		"postup = echo a ; echo b#c  # a comment",
		"PreDown = ip link show %i",
		"PostDown = logger 'yip %i down'",
		"MTU = 1400 ; still a comment for other keys",
	))
	if err != nil {
		t.Fatal(err)
	}
	h := c.Interface.Hooks
	if !slices.Equal(h.PreUp, []string{"modprobe tun"}) ||
		!slices.Equal(h.PostUp, []string{"iptables -A FORWARD -i %i -j ACCEPT; iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE", "echo a ; echo b#c"}) ||
		!slices.Equal(h.PreDown, []string{"ip link show %i"}) || !slices.Equal(h.PostDown, []string{"logger 'yip %i down'"}) {
		t.Errorf("hooks %q", h)
	}
	if c.Interface.MTU != 1400 || h.Empty() {
		t.Errorf("MTU %d, empty %v", c.Interface.MTU, h.Empty())
	}
	// %i in PreUp is fine with a fixed name, and %d without %i.
	for _, lines := range [][]string{{"Name = wg0", "PreUp = echo %i"}, {"Name = yip%d", "PreUp = echo x", "PostUp = echo %i"}} {
		c, err := testParse(t, testText(t, append([]string{"[Interface]", "PrivateKey = {PRIV}"}, lines...)...))
		if err != nil {
			t.Fatalf("%q: %v", lines, err)
		}
		if name, err := c.Interface.PreUpName(); err != nil || name != c.Interface.Name {
			t.Errorf("%q: PreUpName %q, %v", lines, name, err)
		}
	}
}

// FullTunnel names the families a peer routes whole, only with Table =
// auto.
func TestConfigFullTunnel(t *testing.T) {
	for _, tc := range []struct {
		lines  []string
		v4, v6 bool
	}{
		{[]string{"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8, ::/1"}, false, false},
		{[]string{"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 10.0.0.0/8", "[Peer]", "PublicKey = {PUB2}", "AllowedIPs = 0.0.0.0/0"}, true, false},
		{[]string{"[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0, ::/0"}, true, true},
		{[]string{"Table = auto", "[Peer]", "PublicKey = {PUB1}", "AllowedIPs = ::/0"}, false, true},
		{[]string{"Table = main", "[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0, ::/0"}, false, false},
		{[]string{"Table = off", "[Peer]", "PublicKey = {PUB1}", "AllowedIPs = 0.0.0.0/0"}, false, false},
	} {
		c, err := testParse(t, testText(t, append([]string{"[Interface]", "PrivateKey = {PRIV}"}, tc.lines...)...))
		if err != nil {
			t.Fatal(err)
		}
		if v4, v6 := c.FullTunnel(); v4 != tc.v4 || v6 != tc.v6 {
			t.Errorf("%s: FullTunnel %v %v, want %v %v", strings.Join(tc.lines, "; "), v4, v6, tc.v4, tc.v6)
		}
	}
}

// Every key has a row in docs/CONFIG.md's tables.
func TestConfigKeysDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/CONFIG.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `") {
			key, _, _ := strings.Cut(l[2:], " | ")
			rows = append(rows, key)
		}
	}
	all := strings.Join(rows, "\n")
	for _, table := range []map[string]string{interfaceKeys, peerKeys} {
		for _, k := range table {
			if !strings.Contains(all, "`"+k+"`") {
				t.Errorf("%s has no row in docs/CONFIG.md", k)
			}
		}
	}
}
