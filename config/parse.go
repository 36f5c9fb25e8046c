// The parse step: splits the text into lines, sections and keys and turns
// it into a parser value, without any I/O. The PrivateKeyFile path and
// Endpoint host names are kept as written for the readKey and resolve
// steps.

package config

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/fec"
)

// Canonical key names by lower-case spelling.
var (
	interfaceKeys = keyTable("Name", "PrivateKey", "PrivateKeyFile", "ListenPort",
		"ListenAddress", "Address", "MTU", "Shards", "FEC", "MetricsListen", "DisableOffload", "Padding",
		"Table", "FwMark", "PreUp", "PostUp", "PreDown", "PostDown")
	peerKeys = keyTable("PublicKey", "PresharedKey", "Endpoint", "AllowedIPs",
		"PersistentKeepalive", "LegacyMAC")
	// hookKeys hold shell commands: only '#' starts a comment in their
	// lines, as in wg-quick, so "a ; b" keeps its second command.
	hookKeys = keyTable("PreUp", "PostUp", "PreDown", "PostDown")
	// Keys of wg-quick that yip-router does not have, with what to do
	// instead.
	foreignKeys = map[string]string{
		"dns": "wg-quick's DNS: yip-router does not set the resolver; set it with resolvectl or resolvconf in PostUp, " +
			"e.g. PostUp = resolvectl dns %i 192.0.2.53",
		"saveconfig": "wg-quick's SaveConfig: yip-router never rewrites its config; edit the file and reload " +
			"(systemctl reload, or SIGHUP)",
	}
)

func keyTable(names ...string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = n
	}
	return m
}

// multiKey reports keys that may repeat (their values accumulate).
func multiKey(k string) bool {
	return k == "Address" || k == "AllowedIPs" || hookKeys[strings.ToLower(k)] != ""
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
}

// keySources records where a config's keys came from.
type keySources struct {
	files  []string // PrivateKeyFile paths read
	inline bool     // a PrivateKey or PresharedKey in the file itself
}

// parser is a config on its way through the steps: the values so far, the
// line of each key for messages, and the problems found.
type parser struct {
	name string

	errs        []*Error
	warns       []*Error // problems that do not stop the router
	dropped     int
	droppedLine int

	iface      Interface
	ifaceLine  int            // 0 = no [Interface] yet
	ifaceSeen  map[string]int // canonical key -> line
	privOK     bool           // iface.PrivateKey holds a valid key
	addrLines  []int          // line of each Addresses entry
	keyPath    string         // PrivateKeyFile as written, for the readKey step
	keyLine    int            // its line
	tableLine  int            // line of a Table name for the tables step (0: none to look up)
	preUpLines []int          // line of each PreUp command

	sec   sectionKind
	peers []*peerState

	keys keySources
}

// parse parses the text of a config file. It does no I/O: the readKey and
// resolve steps read the PrivateKeyFile and look up host names.
func parse(name string, data []byte) *parser {
	p := &parser{name: name}
	p.iface = Interface{
		Name:          defaultName,
		ListenPort:    defaultPort,
		ListenAddress: netip.IPv6Unspecified(),
		MTU:           DefaultMTU,
		Shards:        Shards{Auto: true},
		FEC:           fec.Mode{Kind: fec.ModeAuto},
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
	p.checkText()
	return p
}

// warnf records a problem that does not stop the router (Config.Warnings).
func (p *parser) warnf(line int, section, key, format string, args ...any) {
	p.warns = append(p.warns, &Error{File: p.name, Line: line, Section: section, Key: key, Msg: oneLine(fmt.Sprintf(format, args...))})
}

// errorf records a problem. Past maxErrors it keeps the maxErrors with
// the lowest lines (the steps find problems out of line order: a key file's
// after the text's) and counts the rest, whose lowest line the "too many
// errors" message then points at.

func (p *parser) errorf(line int, section, key, format string, args ...any) {
	e := &Error{File: p.name, Line: line, Section: section, Key: key, Msg: oneLine(fmt.Sprintf(format, args...))}
	if len(p.errs) < maxErrors {
		p.errs = append(p.errs, e)
		return
	}
	last := 0
	for i, x := range p.errs {
		if x.Line > p.errs[last].Line {
			last = i
		}
	}
	if line < p.errs[last].Line {
		e, p.errs[last] = p.errs[last], e
	}
	if p.dropped == 0 || e.Line < p.droppedLine {
		p.droppedLine = e.Line
	}
	p.dropped++
}

// line handles one line of the file (terminator removed).
func (p *parser) line(n int, raw []byte) {
	if len(raw) > maxLineLen {
		p.errorf(n, "", "", "line is longer than %d bytes", maxLineLen)
		return
	}
	text, marks := string(raw), "#;"
	if k, _, ok := strings.Cut(text, "="); ok && hookKeys[strings.ToLower(strings.TrimSpace(k))] != "" {
		marks = "#"
	}
	s := strings.TrimSpace(stripComment(text, marks))
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
			p.errorf(n, sec, show(k), "unknown key (%s)", foreignKeys[lk])
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

// stripComment removes a comment: one of marks at the start of the line or
// after a space or tab.
func stripComment(s, marks string) string {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(marks, s[i]) >= 0 && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t') {
			return s[:i]
		}
	}
	return s
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
