// Package config reads yip-router's config file: WireGuard-style INI. The
// reference for every key, the MTU rule and the error format is
// docs/CONFIG.md; keep the two in step.
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// DefaultMTU is the inner (TUN) MTU when the config sets none: a 1500-byte
// underlay minus the IPv6 (40) and UDP (8) headers, minus the largest
// per-datagram overhead, 42 bytes for a parity datagram: 16 bytes of framing
// (crypto.FrameOverhead), 2 bytes of FEC length prefix and 24 bytes of AEAD
// counter and tag (crypto.SymbolOverhead). See docs/CONFIG.md.
const DefaultMTU = 1410

// MaxMTU is the largest inner MTU: a sealed packet (MTU + 24) must fit the
// largest FEC data symbol.
const MaxMTU = fec.MaxSymbolLen - crypto.SymbolOverhead // 1576

// Config is a parsed config file.
type Config struct {
	Path      string // file it was read from ("" for readers)
	Interface Interface
	Peers     []Peer
	// SecretFiles are the files that hold a key: the PrivateKeyFile, and
	// the config file itself when it holds a PrivateKey or PresharedKey.
	SecretFiles []string
}

// ExposedSecretFiles names the SecretFiles that group or others may read or
// write, with their mode: a key readable by others is a key that is no
// longer secret.
func (c *Config) ExposedSecretFiles() []string {
	var out []string
	for _, f := range c.SecretFiles {
		fi, err := os.Stat(f)
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			out = append(out, fmt.Sprintf("%s (mode %04o)", f, fi.Mode().Perm()))
		}
	}
	return out
}

// Interface is the [Interface] section.
type Interface struct {
	Name          string            // TUN interface name; default "yip0"; may contain one %d
	PrivateKey    crypto.PrivateKey // from PrivateKey or PrivateKeyFile
	ListenPort    uint16            // 0 (default): a free port the kernel picks at each start
	ListenAddress netip.Addr        // underlay address to bind; default :: (both families)
	Addresses     []netip.Prefix    // key Address; with host bits, e.g. 10.1.0.1/24
	MTU           int               // default DefaultMTU; 576..MaxMTU, >= 1280 with an IPv6 Address
	ShardsAuto    bool              // Shards = auto (the default)
	Shards        int               // Shards = N, 1..64 (0 when ShardsAuto)
	FEC           fec.Mode          // default auto
	MetricsListen string            // optional host:port (a valid netip.AddrPort)
	// DisableOffload turns offloads off by hand (key DisableOffload, a
	// comma-separated list); all are on by default where the kernel
	// has them.
	DisableOffload OffloadSet
}

// Peer is one [Peer] section.
type Peer struct {
	Line                int                 // line of its [Peer] header, for messages
	PublicKey           crypto.PublicKey    // required
	PresharedKey        crypto.PresharedKey // zero = none
	Endpoint            netip.AddrPort      // zero = none (responder only)
	EndpointText        string              // as written
	AllowedIPs          []netip.Prefix      // masked; no overlaps within or between peers
	PersistentKeepalive time.Duration       // 0 = off
}

// PeerByKey returns the peer with public key k, or nil.
func (c *Config) PeerByKey(k crypto.PublicKey) *Peer {
	for i := range c.Peers {
		if c.Peers[i].PublicKey == k {
			return &c.Peers[i]
		}
	}
	return nil
}

// Error is one problem in a config file. Load and Parse
// return all problems found (up to 20) joined with errors.Join, so the
// error's text has one line per problem; errors.As finds the first
// *Error and the Unwrap() []error method gives them all.
type Error struct {
	File    string
	Line    int    // 1-based; 0 when not about a line (e.g. the file cannot be opened)
	Section string // "Interface", "Peer", an unknown section as written, or ""
	Key     string // canonical key name, an unknown key as written, or ""
	Msg     string
}

// Error formats as FILE:LINE: [Section] Key: message, leaving out the
// parts that are empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Section != "" {
		b.WriteString("[" + e.Section + "]")
	}
	if e.Key != "" {
		if e.Section != "" {
			b.WriteByte(' ')
		}
		b.WriteString(e.Key)
	}
	if e.Section != "" || e.Key != "" {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

const (
	maxFileSize   = 1 << 20 // bytes
	maxLineLen    = 4096    // bytes, without the line terminator
	maxErrors     = 20
	maxKeyFile    = 4096 // bytes read from a PrivateKeyFile
	minMTU        = 576
	minIPv6MTU    = 1280
	maxShards     = 64
	defaultName   = "yip0"
	defaultPort   = 0 // no well-known port: a DPI box maps 51820 to WireGuard
	lookupTimeout = 5 * time.Second
	ifNameMax     = 15 // IFNAMSIZ - 1
)

const (
	secInterface = "Interface"
	secPeer      = "Peer"
)

// Canonical key names by lower-case spelling.
var (
	interfaceKeys = keyTable("Name", "PrivateKey", "PrivateKeyFile", "ListenPort",
		"ListenAddress", "Address", "MTU", "Shards", "FEC", "MetricsListen", "DisableOffload")
	peerKeys = keyTable("PublicKey", "PresharedKey", "Endpoint", "AllowedIPs",
		"PersistentKeepalive")
	// Keys of wg / wg-quick that yip-router does not have.
	foreignKeys = keyTable("DNS", "Table", "PreUp", "PostUp", "PreDown", "PostDown",
		"SaveConfig", "FwMark")
)

func keyTable(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = n
	}
	return m
}

// multiKey reports keys that may repeat (their values accumulate).
func multiKey(k string) bool { return k == "Address" || k == "AllowedIPs" }

// Load reads and parses the config file at path. A relative
// PrivateKeyFile is taken relative to the directory of path.
func Load(path string) (*Config, error) {
	fail := func(msg string) (*Config, error) {
		return nil, errors.Join(&Error{File: path, Msg: oneLine(msg)})
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(pathErr(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fail("is a directory, not a config file")
	}
	var secrets keySources
	c, err := parseConfig(path, f, options{dir: filepath.Dir(path), secrets: &secrets})
	if err != nil {
		return nil, err
	}
	c.Path = path
	c.SecretFiles = secrets.files
	if secrets.inline {
		c.SecretFiles = append(c.SecretFiles, path)
	}
	return c, nil
}

// Parse parses a config from r; name is used in error messages. A
// relative PrivateKeyFile is taken relative to the current directory.
// Endpoint host names are resolved with net.DefaultResolver.
func Parse(name string, r io.Reader) (*Config, error) {
	return parseConfig(name, r, options{})
}

// options are the parser's outside dependencies, replaceable in tests and
// fuzzing.
type options struct {
	dir     string                                                       // base of a relative PrivateKeyFile; "" = current directory
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error) // nil = net.DefaultResolver
	readKey func(path string) ([]byte, error)                            // nil = readKeyFile
	secrets *keySources                                                  // nil = not recorded
}

// keySources records where a config's keys came from.
type keySources struct {
	files  []string // PrivateKeyFile paths read
	inline bool     // a PrivateKey or PresharedKey in the file itself
}

type sectionKind int

const (
	noSection        sectionKind = iota // before any header
	interfaceSection                    // the [Interface] section
	peerSection                         // a [Peer] section
	skippedSection                      // unknown or duplicate section: its keys are ignored
)

type peerState struct {
	Peer
	seen         map[string]int // canonical key -> line
	allowedLines []int          // line of each AllowedIPs entry
	epHost       string         // Endpoint host name still to resolve
	epPort       uint16
}

type parser struct {
	name string
	opt  options

	errs        []*Error
	dropped     int
	droppedLine int

	iface     Interface
	ifaceLine int            // 0 = no [Interface] yet
	ifaceSeen map[string]int // canonical key -> line
	privOK    bool
	addrLines []int // line of each Addresses entry

	sec   sectionKind
	peers []*peerState

	secrets keySources
}

func parseConfig(name string, r io.Reader, opt options) (*Config, error) {
	if opt.lookup == nil {
		opt.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if opt.readKey == nil {
		opt.readKey = readKeyFile
	}
	p := &parser{name: name, opt: opt}
	p.iface = Interface{
		Name:          defaultName,
		ListenPort:    defaultPort,
		ListenAddress: netip.IPv6Unspecified(),
		MTU:           DefaultMTU,
		ShardsAuto:    true,
		FEC:           fec.Mode{Kind: fec.ModeAuto},
	}

	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, errors.Join(&Error{File: name, Msg: oneLine("read: " + err.Error())})
	}
	if len(data) > maxFileSize {
		line := bytes.Count(data[:maxFileSize], []byte{'\n'}) + 1
		return nil, errors.Join(&Error{File: name, Line: line,
			Msg: fmt.Sprintf("file is larger than 1 MiB (%d bytes)", maxFileSize)})
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		p.line(n, bytes.TrimSuffix(line, []byte{'\r'}))
	}
	p.finish()

	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		if p.dropped > 0 {
			p.errs = append(p.errs, &Error{File: name, Line: p.droppedLine,
				Msg: fmt.Sprintf("too many errors: %d more not shown", p.dropped)})
		}
		errs := make([]error, len(p.errs))
		for i, e := range p.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	if opt.secrets != nil {
		*opt.secrets = p.secrets
	}
	c := &Config{Interface: p.iface}
	for _, ps := range p.peers {
		c.Peers = append(c.Peers, ps.Peer)
	}
	return c, nil
}

func (p *parser) errorf(line int, section, key, format string, args ...any) {
	if len(p.errs) >= maxErrors {
		if p.dropped == 0 {
			p.droppedLine = line
		}
		p.dropped++
		return
	}
	p.errs = append(p.errs, &Error{File: p.name, Line: line, Section: section, Key: key,
		Msg: oneLine(fmt.Sprintf(format, args...))})
}

// line handles one line of the file (terminator removed).
func (p *parser) line(n int, raw []byte) {
	if len(raw) > maxLineLen {
		p.errorf(n, "", "", "line is longer than %d bytes", maxLineLen)
		return
	}
	s := strings.TrimSpace(stripComment(string(raw)))
	if s == "" {
		return
	}
	if s[0] == '[' {
		p.header(n, s)
		return
	}
	sec := p.secName()
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		// Not quoted: a stray line may well be a pasted key.
		p.errorf(n, sec, "", "not a \"Key = Value\" line, a section header or a comment")
		return
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if k == "" {
		p.errorf(n, sec, "", "missing key name before '='")
		return
	}
	lk := strings.ToLower(k)
	switch p.sec {
	case skippedSection:
		return // the section header was already reported
	case noSection:
		where := "put it under [Interface] or [Peer]"
		if c, ok := interfaceKeys[lk]; ok {
			k, where = c, "it belongs under [Interface]"
		} else if c, ok := peerKeys[lk]; ok {
			k, where = c, "it belongs under [Peer]"
		} else {
			k = show(k)
		}
		p.errorf(n, "", k, "key outside any section (%s)", where)
		return
	}
	table, other, otherSec := interfaceKeys, peerKeys, secPeer
	seen := p.ifaceSeen
	var peer *peerState
	if p.sec == peerSection {
		table, other, otherSec = peerKeys, interfaceKeys, secInterface
		peer = p.peers[len(p.peers)-1]
		seen = peer.seen
	}
	key, ok := table[lk]
	if !ok {
		switch {
		case other[lk] != "":
			p.errorf(n, sec, show(k), "unknown key in [%s] (%s belongs in [%s])", sec, other[lk], otherSec)
		case foreignKeys[lk] != "":
			p.errorf(n, sec, show(k), "unknown key (a WireGuard/wg-quick key that yip-router does not support)")
		default:
			p.errorf(n, sec, show(k), "unknown key")
		}
		return
	}
	if first, dup := seen[key]; dup && !multiKey(key) {
		p.errorf(n, sec, key, "duplicate key (first set at line %d)", first)
		return
	}
	if _, dup := seen[key]; !dup {
		seen[key] = n
	}
	if peer != nil {
		p.peerKey(n, peer, key, v)
	} else {
		p.interfaceKey(n, key, v)
	}
}

func (p *parser) secName() string {
	switch p.sec {
	case interfaceSection:
		return secInterface
	case peerSection:
		return secPeer
	}
	return ""
}

func (p *parser) header(n int, s string) {
	if !strings.HasSuffix(s, "]") {
		p.sec = skippedSection
		p.errorf(n, "", "", "%s is not a section header (want [Interface] or [Peer])", quoteShort(s))
		return
	}
	name := strings.TrimSpace(s[1 : len(s)-1])
	switch strings.ToLower(name) {
	case "interface":
		if p.ifaceLine != 0 {
			p.sec = skippedSection
			p.errorf(n, secInterface, "", "duplicate section (first at line %d); there must be exactly one", p.ifaceLine)
			return
		}
		p.sec, p.ifaceLine, p.ifaceSeen = interfaceSection, n, map[string]int{}
	case "peer":
		p.sec = peerSection
		p.peers = append(p.peers, &peerState{Peer: Peer{Line: n}, seen: map[string]int{}})
	default:
		p.sec = skippedSection
		p.errorf(n, show(name), "", "unknown section (want [Interface] or [Peer])")
	}
}

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
		text, what := v, ""
		if key == "PrivateKeyFile" {
			if v == "" {
				bad("value is empty (want a path to a file holding the base64 private key)")
				return
			}
			path := v
			if !filepath.IsAbs(path) && p.opt.dir != "" {
				path = filepath.Join(p.opt.dir, path)
			}
			b, err := p.opt.readKey(path)
			if err != nil {
				bad("%q: %s", path, pathErr(err))
				return
			}
			text, what = string(b), strconv.Quote(path)+": "
			p.secrets.files = append(p.secrets.files, path)
		} else {
			p.secrets.inline = true
		}
		k, err := crypto.ParsePrivateKey(text)
		if err != nil {
			bad("%s%v", what, err)
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
		if strings.EqualFold(v, "auto") {
			ic.ShardsAuto, ic.Shards = true, 0
			return
		}
		s, err := strconv.ParseUint(v, 10, 32)
		if err != nil || s < 1 || s > maxShards {
			bad("%q: want auto or a number of shards 1..%d", v, maxShards)
			return
		}
		ic.ShardsAuto, ic.Shards = false, int(s)
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
		p.secrets.inline = true
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
		ps.epHost, ps.epPort = host, pt
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
	}
}

// finish runs the checks that need the whole file.
func (p *parser) finish() {
	ic := &p.iface
	if p.ifaceLine == 0 {
		p.errorf(1, secInterface, "", "section is missing (exactly one is required)")
	} else {
		_, k1 := p.ifaceSeen["PrivateKey"]
		_, k2 := p.ifaceSeen["PrivateKeyFile"]
		if !k1 && !k2 {
			p.errorf(p.ifaceLine, secInterface, "PrivateKey", "missing (set PrivateKey or PrivateKeyFile)")
		}
		if l, ok := p.ifaceSeen["MTU"]; ok && ic.MTU < minIPv6MTU {
			for i, a := range ic.Addresses {
				if a.Addr().Is6() {
					p.errorf(l, secInterface, "MTU", "%d is below %d, the IPv6 minimum, and Address %s (line %d) is IPv6",
						ic.MTU, minIPv6MTU, a, p.addrLines[i])
					break
				}
			}
		}
	}

	var own crypto.PublicKey
	if p.privOK {
		own = ic.PrivateKey.Public()
	}
	byKey := map[crypto.PublicKey]int{}
	for _, ps := range p.peers {
		l, seen := ps.seen["PublicKey"]
		switch {
		case !seen:
			p.errorf(ps.Line, secPeer, "PublicKey", "missing (every [Peer] needs one)")
		case ps.PublicKey.IsZero():
			// bad value, already reported
		case p.privOK && ps.PublicKey == own:
			p.errorf(l, secPeer, "PublicKey", "is this interface's own public key (from %s at line %d)",
				p.privKeyName(), p.privLine())
		default:
			if first, dup := byKey[ps.PublicKey]; dup {
				p.errorf(l, secPeer, "PublicKey", "duplicate peer: same key as the peer at line %d (PublicKey at line %d)",
					p.peerAt(first), first)
			} else {
				byKey[ps.PublicKey] = l
			}
		}
		p.endpoint(ps)
	}
	p.overlaps()
}

func (p *parser) privKeyName() string {
	if _, ok := p.ifaceSeen["PrivateKey"]; ok {
		return "PrivateKey"
	}
	return "PrivateKeyFile"
}

func (p *parser) privLine() int { return p.ifaceSeen[p.privKeyName()] }

// peerAt returns the header line of the peer whose PublicKey is on line l.
func (p *parser) peerAt(l int) int {
	for _, ps := range p.peers {
		if ps.seen["PublicKey"] == l {
			return ps.Line
		}
	}
	return 0
}

// endpoint resolves a host name and checks the address family against a
// specific ListenAddress.
func (p *parser) endpoint(ps *peerState) {
	l, ok := ps.seen["Endpoint"]
	if !ok {
		return
	}
	la := p.iface.ListenAddress.Unmap()
	// Bound to :: the sockets carry both families; to anything else
	// (0.0.0.0 included) one.
	specific := la != netip.IPv6Unspecified()
	compatible := func(a netip.Addr) bool { return !specific || a.Is4() == la.Is4() }
	family := "IPv4"
	if la.Is6() {
		family = "IPv6"
	}
	if ps.epHost != "" {
		if len(p.errs) >= maxErrors {
			return // not worth a slow lookup: nothing more can be shown
		}
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		addrs, err := p.opt.lookup(ctx, ps.epHost)
		cancel()
		if err != nil {
			p.errorf(l, secPeer, "Endpoint", "cannot resolve %q: %v", ps.epHost, err)
			return
		}
		var pick netip.Addr
		for _, a := range addrs {
			a = a.Unmap()
			if !a.IsValid() || !compatible(a) {
				continue
			}
			if !pick.IsValid() || (a.Is4() && !pick.Is4()) {
				pick = a
			}
		}
		if !pick.IsValid() {
			if specific {
				p.errorf(l, secPeer, "Endpoint", "%q has no %s address to match ListenAddress %s (line %d)",
					ps.epHost, family, la, p.ifaceSeen["ListenAddress"])
			} else {
				p.errorf(l, secPeer, "Endpoint", "%q resolves to no IP address", ps.epHost)
			}
			return
		}
		ps.Endpoint = netip.AddrPortFrom(pick, ps.epPort)
		return
	}
	if ps.Endpoint.IsValid() && !compatible(ps.Endpoint.Addr()) {
		p.errorf(l, secPeer, "Endpoint", "%s is not %s like ListenAddress %s (line %d)",
			ps.Endpoint, family, la, p.ifaceSeen["ListenAddress"])
	}
}

// overlaps reports AllowedIPs prefixes that equal or contain another, within
// a peer or between peers. Prefixes are either nested or disjoint, so after
// sorting by (family, address, length) a stack of enclosing prefixes finds
// every overlapping one in O(n log n).
func (p *parser) overlaps() {
	type entry struct {
		pf   netip.Prefix
		line int
		peer int // header line
		seq  int // position in the file, to order entries on the same line
	}
	var all []entry
	for _, ps := range p.peers {
		for i, pf := range ps.AllowedIPs {
			all = append(all, entry{pf, ps.allowedLines[i], ps.Line, len(all)})
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := a.pf.Addr().Compare(b.pf.Addr()); c != 0 {
			return c // orders IPv4 before IPv6
		}
		if c := a.pf.Bits() - b.pf.Bits(); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	var stack []entry
	for _, e := range all {
		for len(stack) > 0 && !stack[len(stack)-1].pf.Contains(e.pf.Addr()) {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			first, second := stack[len(stack)-1], e // first contains second
			if first.seq > second.seq {
				first, second = second, first
			}
			whose := fmt.Sprintf("peer at line %d", first.peer)
			if first.peer == second.peer {
				whose = "same peer"
			}
			var rel string
			switch {
			case first.pf == second.pf:
				rel = "is also listed at"
			case second.pf.Bits() < first.pf.Bits():
				rel = "contains " + first.pf.String() + " from"
			default:
				rel = "is inside " + first.pf.String() + " from"
			}
			p.errorf(second.line, secPeer, "AllowedIPs", "%s %s line %d (%s); AllowedIPs must not overlap",
				second.pf, rel, first.line, whose)
		}
		stack = append(stack, e)
	}
}

// stripComment removes a comment: '#' or ';' at the start of the line or
// after a space or tab.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		if (s[i] == '#' || s[i] == ';') && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
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

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes; want just the base64 key", maxKeyFile)
	}
	return b, nil
}

// pathErr drops the path from an *fs.PathError (messages name it already).
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// show prints a key or section name as is when it is plain, else quoted.
func show(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// quoteShort quotes a line for a message, cut short: it may hold a key.
func quoteShort(s string) string {
	const max = 32
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// oneLine keeps a message on one line whatever an error it wraps says.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", " ").Replace(s)
}
