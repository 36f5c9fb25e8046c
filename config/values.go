// The value of each key: what it may hold and where it goes in the
// Interface or Peer, and the small parsers the keys share.

package config

import (
	"errors"

	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

func (p *parser) interfaceKey(n int, key, v string) {
	const sec = secInterface
	bad := func(format string, args ...any) { p.errorf(n, sec, key, format, args...) }
	ic := &p.iface
	switch key {
	case "Name":
		if msg := checkIfName(v); msg != "" {
			bad("%s", msg)
			return
		}
		ic.Name = v
	case "PrivateKey", "PrivateKeyFile":
		otherKey := "PrivateKeyFile"
		if key == otherKey {
			otherKey = "PrivateKey"
		}
		if l, ok := p.ifaceSeen[otherKey]; ok {
			bad("both PrivateKey and PrivateKeyFile are set (%s at line %d); use one", otherKey, l)
			return
		}
		if key == "PrivateKeyFile" {
			if v == "" {
				bad("value is empty (want a path to a file holding the base64 private key)")
				return
			}
			p.keyPath, p.keyLine = v, n // read by the readKey step
			return
		}
		p.keys.inline = true
		k, err := crypto.ParsePrivateKey(v)
		if err != nil {
			bad("%v", err)
			return
		}
		ic.PrivateKey, p.privOK = k, true
	case "ListenPort":
		port, msg := parsePort(v)
		if msg != "" {
			bad("%s", msg)
			return
		}
		ic.ListenPort = port
	case "ListenAddress":
		a, err := netip.ParseAddr(v)
		if err != nil {
			bad("%q is not an IP address", v)
			return
		}
		ic.ListenAddress = a
	case "Address":
		for _, item := range splitList(v) {
			pf, msg := parsePrefix(item)
			if msg != "" {
				bad("%s", msg)
				continue
			}
			if i := slices.Index(ic.Addresses, pf); i >= 0 {
				bad("%s is listed twice (also at line %d)", pf, p.addrLines[i])
				continue
			}
			ic.Addresses = append(ic.Addresses, pf)
			p.addrLines = append(p.addrLines, n)
		}
	case "MTU":
		m, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			bad("%q is not a number (want %d..%d)", v, minMTU, MaxMTU)
			return
		}
		if m < minMTU || m > MaxMTU {
			bad("%d is out of range %d..%d", m, minMTU, MaxMTU)
			return
		}
		ic.MTU = int(m)
	case "Shards":
		s, err := ParseShards(v)
		if err != nil {
			bad("%v", err)
			return
		}
		ic.Shards = s
	case "FEC":
		m, err := fec.ParseMode(v)
		if err != nil {
			bad("%s", strings.TrimPrefix(err.Error(), "fec: "))
			return
		}
		ic.FEC = m
	case "MetricsListen":
		if _, err := netip.ParseAddrPort(v); err != nil {
			bad("%q is not an address:port (like 127.0.0.1:9586 or [::1]:9586)", v)
			return
		}
		ic.MetricsListen = v
	case "DisableOffload":
		set, err := ParseOffloadSet(v)
		if err != nil {
			bad("%v", err)
			return
		}
		ic.DisableOffload = set
	case "Padding":
		i := slices.IndexFunc([]Padding{PaddingOff, PaddingLight, PaddingFull}, func(m Padding) bool { return strings.EqualFold(v, m.String()) })
		if i < 0 {
			bad("%q: want off, light or full", v)
			return
		}
		ic.Padding = Padding(i)
	case "Table":
		t, msg := parseTable(v)
		if msg != "" {
			bad("%s", msg)
			return
		}
		ic.Table = t
		if t.Mode == TableID && t.ID == 0 {
			p.tableLine = n // a name: looked up by the tables step
		}
	case "FwMark":
		m, msg := parseFwMark(v)
		if msg != "" {
			bad("%s", msg)
			return
		}
		ic.FwMark = m
	case "PreUp", "PostUp", "PreDown", "PostDown":
		if v == "" {
			bad("value is empty (want a shell command)")
			return
		}
		l := ic.Hooks.of(key)
		*l = append(*l, v)
		if key == "PreUp" {
			p.preUpLines = append(p.preUpLines, n)
		}
	}
}

func (p *parser) peerKey(n int, ps *peerState, key, v string) {
	const sec = secPeer
	bad := func(format string, args ...any) { p.errorf(n, sec, key, format, args...) }
	switch key {
	case "PublicKey":
		k, err := crypto.ParsePublicKey(v)
		if err != nil {
			bad("%v", err)
			return
		}
		ps.PublicKey = k
	case "PresharedKey":
		k, err := crypto.ParsePresharedKey(v)
		if err != nil {
			bad("%v", err)
			return
		}
		ps.PresharedKey = k
		p.keys.inline = true
	case "Endpoint":
		ps.EndpointText = v
		if ap, err := netip.ParseAddrPort(v); err == nil {
			if ap.Port() == 0 {
				bad("%q: port 0 is not allowed (want 1..65535)", v)
				return
			}
			if ap.Addr().Zone() != "" {
				// Sends carry no zone (a lane's address is matched without
				// one), and a zone is free text that would break show's
				// tab-separated output.
				bad("%q: an address with a zone (%%%s) is not supported", v, ap.Addr().Zone())
				return
			}
			ps.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			return
		}
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			bad("%q is not host:port (like 192.0.2.1:51820, [2001:db8::1]:51820 or vpn.example.com:51820)", v)
			return
		}
		pt, msg := parsePort(port)
		if msg != "" {
			bad("%q: %s", v, msg)
			return
		}
		if _, err := netip.ParseAddr(host); err == nil || !validHostname(host) {
			bad("%q is not host:port: %q is neither an IP address nor a host name", v, host)
			return
		}
		ps.EndpointName = HostPort{Host: host, Port: pt} // looked up by the resolve step
	case "AllowedIPs":
		for _, item := range splitList(v) {
			pf, msg := parsePrefix(item)
			if msg != "" {
				bad("%s", msg)
				continue
			}
			ps.AllowedIPs = append(ps.AllowedIPs, pf.Masked())
			ps.allowedLines = append(ps.allowedLines, n)
		}
	case "PersistentKeepalive":
		if strings.EqualFold(v, "off") {
			ps.PersistentKeepalive = 0
			return
		}
		s, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			bad("%q: want off or seconds 0..65535", v)
			return
		}
		ps.PersistentKeepalive = time.Duration(s) * time.Second
	case "LegacyMAC":
		switch strings.ToLower(v) {
		case "on":
			ps.LegacyMAC = true
		case "off":
			ps.LegacyMAC = false
		default:
			bad("%q: want on or off", v)
		}
	}
}

// parseTable parses a Table value: auto, off, a number 1..4294967295, or
// a table name. A name other than iproute2's built-in main, default and
// local comes back as TableID with ID 0, for the tables step to look up.
func parseTable(v string) (Table, string) {
	switch l := strings.ToLower(v); {
	case l == "auto":
		return Table{Mode: TableAuto}, ""
	case l == "off":
		return Table{Mode: TableOff}, ""
	case builtinTables[l] != 0:
		return Table{Mode: TableID, ID: builtinTables[l], Name: l}, ""
	}
	if v != "" && '0' <= v[0] && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return Table{}, fmt.Sprintf("%q: want auto, off, a table number 1..4294967295 or a name from rt_tables", v)
		}
		return Table{Mode: TableID, ID: uint32(n), Name: v}, ""
	}
	if !tableName(v) {
		return Table{}, fmt.Sprintf("%q: want auto, off, a table number 1..4294967295 or a name from rt_tables", v)
	}
	return Table{Mode: TableID, Name: v}, ""
}

// tableName reports whether s may name a routing table: letters, digits,
// '_', '-' and '.', not starting with a digit.
func tableName(s string) bool {
	if s == "" || len(s) > 64 || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// parseFwMark parses a FwMark value as wg does: off, or a 32-bit number,
// decimal or hexadecimal with 0x; 0 is off.
func parseFwMark(v string) (uint32, string) {
	if strings.EqualFold(v, "off") {
		return 0, ""
	}
	digits, base := v, 10
	if len(v) > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') {
		digits, base = v[2:], 16
	}
	n, err := strconv.ParseUint(digits, base, 32) // no sign, no '_' in a fixed base
	if err != nil {
		return 0, fmt.Sprintf("%q: want off or a 32-bit mark, decimal or 0x hexadecimal", v)
	}
	return uint32(n), ""
}

// splitList splits a comma-separated value; empty items are skipped.
func splitList(v string) []string {
	var out []string
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parsePrefix parses a prefix, or a bare address as a single host.
func parsePrefix(s string) (netip.Prefix, string) {
	var pf netip.Prefix
	var err error
	if strings.Contains(s, "/") {
		pf, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		if a, err = netip.ParseAddr(s); err == nil {
			if a.Zone() != "" {
				return pf, fmt.Sprintf("%q is not a prefix (zones are not allowed)", s)
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		return pf, fmt.Sprintf("%q is not a prefix", s)
	}
	if pf.Addr().Is4In6() {
		return pf, fmt.Sprintf("%q is an IPv4-mapped IPv6 prefix; write it as IPv4", s)
	}
	return pf, ""
}

// parsePort parses a port 1..65535: decimal digits, no sign.
func parsePort(s string) (uint16, string) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Sprintf("%q is not a port (want 1..65535)", s)
	}
	return uint16(n), ""
}

// CheckInterfaceName checks a Linux interface name given outside a file
// (yip-router up --name), by the rules Name follows.
func CheckInterfaceName(s string) error {
	if msg := checkIfName(s); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// checkIfName checks a Linux interface name; "" means valid.
func checkIfName(s string) string {
	switch {
	case s == "":
		return "value is empty"
	case len(s) > ifNameMax:
		return fmt.Sprintf("%q is longer than %d bytes", s, ifNameMax)
	case s == "." || s == "..":
		return fmt.Sprintf("%q is not a valid interface name", s)
	}
	pct := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c >= 0x7f:
			return fmt.Sprintf("%q: an interface name must be printable ASCII without whitespace", s)
		case c == '/' || c == ':':
			return fmt.Sprintf("%q must not contain %q", s, c)
		case c == '%':
			if i+1 >= len(s) || s[i+1] != 'd' {
				return fmt.Sprintf("%q: '%%' must be followed by 'd' (a %%d pattern)", s)
			}
			if pct++; pct > 1 {
				return fmt.Sprintf("%q has more than one %%d pattern", s)
			}
		}
	}
	return ""
}

// validHostname reports whether s is a syntactically valid DNS name.
func validHostname(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	numeric := false // of the last label: a name like 192.0.2.256 is a typo, not a host
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		numeric = true
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
			numeric = numeric && '0' <= c && c <= '9'
		}
	}
	return !numeric
}
