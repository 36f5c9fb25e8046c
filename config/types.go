// The values a config file turns into (Config, Interface, Peer), the Error
// that names a problem's file:line [Section] Key, and the format's limits.

package config

import (
	"fmt"
	"net/netip"
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

// DefaultName is the interface name when the file sets none.
const DefaultName = "yip0"

const (
	maxFileSize   = 1 << 20 // bytes
	maxLineLen    = 4096    // bytes, without the line terminator
	maxErrors     = 20
	maxKeyFile    = 4096 // bytes read from a PrivateKeyFile
	minMTU        = 576
	minIPv6MTU    = 1280
	defaultName   = DefaultName
	defaultPort   = 0 // no well-known port: a DPI box maps 51820 to WireGuard
	lookupTimeout = 5 * time.Second
	ifNameMax     = 15 // IFNAMSIZ - 1
)

// Section names as messages spell them.
const (
	secInterface = "Interface"
	secPeer      = "Peer"
)

// Config is a parsed config file.
type Config struct {
	Path      string // file it was read from ("" for readers)
	Interface Interface
	Peers     []Peer
	// SecretFiles are the files that hold a key: the PrivateKeyFile, and
	// the config file itself when it holds a PrivateKey or PresharedKey.
	SecretFiles []string
	// Warnings are problems that do not stop the router, each at its
	// line: an Endpoint host name that does not resolve now.
	Warnings []*Error
}

// Interface is the [Interface] section.
type Interface struct {
	Name          string            // TUN interface name; default "yip0"; may contain one %d
	PrivateKey    crypto.PrivateKey // from PrivateKey or PrivateKeyFile
	ListenPort    uint16            // 0 (default): a free port the kernel picks at each start
	ListenAddress netip.Addr        // underlay address to bind; default :: (both families)
	Addresses     []netip.Prefix    // key Address; with host bits, e.g. 10.1.0.1/24
	MTU           int               // default DefaultMTU; 576..MaxMTU, >= 1280 with an IPv6 Address
	Shards        Shards            // default auto
	FEC           fec.Mode          // default auto
	MetricsListen string            // optional host:port (a valid netip.AddrPort)
	// DisableOffload turns offloads off by hand (key DisableOffload, a
	// comma-separated list); all are on by default where the kernel
	// has them.
	DisableOffload OffloadSet
	// Padding is how much the datagrams to peers are padded (key
	// Padding: off, the default, light or full).
	Padding Padding
	// Table is where the routes for the peers' AllowedIPs go (key
	// Table: auto, the default, off, or a routing table); see
	// FullTunnel.
	Table Table
	// FwMark is the firewall mark every underlay socket carries (key
	// FwMark; 0, the default, is none). A full tunnel without one picks
	// its own (internal/fulltunnel.ChooseMark).
	FwMark uint32
	// Hooks are the PreUp, PostUp, PreDown and PostDown commands.
	Hooks Hooks
}

// Table is the [Interface] Table key, as wg-quick's: where the routes
// for the peers' AllowedIPs go.
type Table struct {
	Mode TableMode
	ID   uint32 // TableID: the table's number (main is 254)
	Name string // TableID: as written, a number or a name
}

// TableMode says what Table holds.
type TableMode uint8

// The Table modes.
const (
	// TableAuto (the default): routes in the main table, except a
	// peer's default route (0.0.0.0/0, ::/0), which goes into a table
	// of its own behind policy rules (FullTunnel).
	TableAuto TableMode = iota
	// TableOff: no routes at all.
	TableOff
	// TableID: every route in table ID, and no policy rules.
	TableID
)

// Routing tables iproute2 knows by name without rt_tables.
var builtinTables = map[string]uint32{"default": 253, "main": 254, "local": 255}

func (t Table) String() string {
	switch t.Mode {
	case TableOff:
		return "off"
	case TableID:
		id := strconv.FormatUint(uint64(t.ID), 10)
		if t.Name != "" && t.Name != id {
			return t.Name + " (" + id + ")"
		}
		return id
	}
	return "auto"
}

// Same reports whether t and u route into the same place, however they
// name the table.
func (t Table) Same(u Table) bool { return t.Mode == u.Mode && t.ID == u.ID }

// Hooks are shell commands run around the interface's life, as wg-quick
// runs them: PreUp before the TUN device exists, PostUp once it is up
// with its routes, PreDown before it is taken down, PostDown after. Each
// key may repeat; the commands run in the order written, with %i
// replaced by the interface's name.
type Hooks struct {
	PreUp, PostUp, PreDown, PostDown []string
}

// of is the list of hook key k.
func (h *Hooks) of(k string) *[]string {
	switch k {
	case "PreUp":
		return &h.PreUp
	case "PostUp":
		return &h.PostUp
	case "PreDown":
		return &h.PreDown
	}
	return &h.PostDown
}

// Empty reports whether no hook is set.
func (h Hooks) Empty() bool {
	return len(h.PreUp)+len(h.PostUp)+len(h.PreDown)+len(h.PostDown) == 0
}

// PreUpName is the interface name %i stands for in PreUp: Name. It is an
// error when a PreUp command uses %i and Name is a pattern (%d), which the
// kernel fills in only when it creates the device, after PreUp.
func (ic *Interface) PreUpName() (string, error) {
	if strings.Contains(ic.Name, "%d") {
		for _, c := range ic.Hooks.PreUp {
			if strings.Contains(c, "%i") {
				return "", fmt.Errorf("%%i in PreUp: the interface name %q is a pattern the kernel fills in when it creates the device, after PreUp; name the interface, or leave %%i out of PreUp", ic.Name)
			}
		}
	}
	return ic.Name, nil
}

// FullTunnel reports the families whose whole address space (0.0.0.0/0,
// ::/0) a peer's AllowedIPs route, with Table = auto. As wg-quick does,
// their default route then goes into a table of its own, numbered like
// the mark the underlay sockets get, behind the rules "not fwmark M
// lookup M" and "lookup main suppress_prefixlength 0": everything but the
// router's own datagrams takes the tunnel, and the main table's default
// route stays for the underlay (docs/CONFIG.md, Table).
func (c *Config) FullTunnel() (v4, v6 bool) {
	for _, p := range c.Peers {
		for _, a := range p.AllowedIPs {
			if c.Interface.Table.FullTunnel(a) {
				v4, v6 = v4 || a.Addr().Is4(), v6 || a.Addr().Is6()
			}
		}
	}
	return v4, v6
}

// FullTunnel reports whether an AllowedIPs prefix p goes through the full
// tunnel's table and rules rather than into t: a default route with
// Table = auto.
func (t Table) FullTunnel(p netip.Prefix) bool { return t.Mode == TableAuto && p.Bits() == 0 }

// Padding is the [Interface] Padding key: random extra bytes on every
// datagram to a peer that reads them, so lengths say less about content.
type Padding uint8

// The padding modes; docs/CONFIG.md gives their byte cost.
const (
	PaddingOff Padding = iota
	PaddingLight
	PaddingFull
)

func (p Padding) String() string {
	return [...]string{"off", "light", "full"}[p]
}

// TunMTU is the MTU the TUN device gets: MTU, less crypto.PadHeadroom when
// datagrams are padded (so a padded datagram still fits the underlay).
func (ic *Interface) TunMTU() int {
	if ic.Padding != PaddingOff {
		return ic.MTU - crypto.PadHeadroom
	}
	return ic.MTU
}

// Peer is one [Peer] section.
type Peer struct {
	Line         int                 // line of its [Peer] header, for messages
	PublicKey    crypto.PublicKey    // required
	PresharedKey crypto.PresharedKey // zero = none
	Endpoint     netip.AddrPort      // zero = none (responder only)
	EndpointText string              // as written
	// EndpointName is the Endpoint's host name and port when it is
	// written as a name (zero otherwise). Endpoint holds what the name
	// resolved to at load time, or nothing when that lookup failed; the
	// router looks the name up again while it runs.
	EndpointName        HostPort
	AllowedIPs          []netip.Prefix // masked; nested prefixes allowed (longest wins), none listed twice
	PersistentKeepalive time.Duration  // 0 = off
	// LegacyMAC (key LegacyMAC = on; default off, only with a
	// PresharedKey): handshakes with this peer, both ways, are masked and
	// MACed under the public keys only, as by routers that predate
	// PSK-keyed handshakes (the PSK still goes into Noise). Both ends
	// must agree.
	LegacyMAC bool
}

// HasEndpoint reports whether the peer has an Endpoint, an address or a
// host name: this router starts handshakes to it (once a name resolves),
// and the peer need not know this router's port.
func (p *Peer) HasEndpoint() bool { return p.Endpoint.IsValid() || !p.EndpointName.IsZero() }

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
