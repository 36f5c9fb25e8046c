package control

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	mrand "math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard"
)

// Random is where the core draws its random numbers.
type Random interface {
	// IntN is for spread (retry jitter, lane choice, rekey jitter):
	// 0 ≤ n' < n.
	IntN(n int) int
	// Uint32 is for session indices, which an observer must not predict.
	Uint32() uint32
}

// sysRandom is the real randomness: math/rand/v2 for spread, crypto/rand
// for indices.
type sysRandom struct{}

func (sysRandom) IntN(n int) int { return mrand.IntN(n) }

func (sysRandom) Uint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// Deps are the core's outside world.
type Deps struct {
	Local *crypto.Local
	Plane DataPlane
	Log   *zap.Logger // nil: no logging
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Rand is the randomness (nil: the real one).
	Rand Random
	// RekeyAfter overrides DefaultRekeyAfter (tests).
	RekeyAfter time.Duration
	// FEC is the starting FEC mode of new lanes (SetFEC changes it).
	FEC fec.Mode
	// KeyLog, if set, receives every lane's framing keys (keylog.go).
	KeyLog io.Writer
}

// Core is the control plane's state and decisions. Its methods are safe for
// concurrent use. The shards call Unmatched (the handshake path,
// handshake.go) and the lane events (events.go) on their goroutines; the
// events are queued and applied by the control loop (Step, Tick), which
// package router runs on one goroutine. A shard takes the core lock (mu)
// only on the handshake path, for a message that passed its mac1: to find
// the pending initiation a response answers, and to answer an initiation
// whose DH it has consumed and install the session.
type Core struct {
	local      *crypto.Local
	cookies    *crypto.CookieChecker
	dp         DataPlane
	log        *zap.Logger
	now        func() time.Time
	rnd        Random
	rekeyAfter time.Duration
	shards     int
	keyLog     io.Writer // under mu

	// known holds the addresses cookie replies go to even over
	// cookieReplyCap: each peer's configured Endpoint (or what its name
	// resolves to now) and the latest address a handshake proved it
	// receives at (an initiator's response from where the initiation
	// went; a responder's lane confirmed, LaneConfirmed), kept by
	// setKnown under mu and read lock-free by the cookie path. Not an
	// address a datagram merely came from: a peer can send its own
	// authenticated datagrams from any source it spoofs, and would so put
	// any address here.
	known     sync.Map           // netip.Addr → struct{}; lock-free reads
	knownRefs map[netip.Addr]int // peers per known address, under mu
	// knownRetry holds the addresses the data plane refused to learn
	// or forget (tellKnown; its map full): address → known. The
	// timers try them again (retryKnownLocked). Under mu.
	knownRetry map[netip.Addr]bool
	// replies counts cookie replies to unknown sources in the current
	// second (cookieReplyCap).
	replies perSecond

	mu      sync.Mutex
	fecMode fec.Mode
	peers   map[crypto.PublicKey]*peer
	byID    map[shard.PeerID]*peer
	nextID  shard.PeerID
	pending map[uint32]*peer // our initiation index → peer

	npending atomic.Int32 // len(pending), read without the lock
	// pendMu guards byEndpoint: our pending initiations by the endpoint
	// they were sent to, so a cookie reply (or junk of its length) finds
	// its candidates in O(1) without the core lock. Lock order: mu, then
	// pendMu.
	pendMu     sync.Mutex
	byEndpoint map[netip.AddrPort][]*crypto.Initiation
	// cookieScans counts pending initiations tried against cookie replies.
	cookieScans atomic.Uint64
	limit       *limiter  // initiations answered without a cookie, per source prefix
	proven      *limiter  // initiations with a valid mac2, per IPv4 address or IPv6 /64
	inits       perSecond // initiations received this second
	// refusals counts this second's initiations that cost a DH and were
	// refused (refusedThreshold).
	refusals perSecond
	// seenInits drops replayed initiations before anything else: a
	// replay of a captured initiation draws no cookie reply, even under
	// load, and does not count towards the load.
	seenInits crypto.InitiationFilter
	hs        handshakeStats

	// events are the shards' lane events, waiting for the control loop
	// (queue.go).
	events *eventQueue
	// outbox holds the initiations the control loop decided in this step
	// (initiate), made and sent once it lets go of mu
	// (sendInitiations). Under mu.
	outbox []initPlan
	// afterDH, if set (tests), runs in sendInitiations after the
	// initiations' DH, before mu is taken to send them.
	afterDH func()
}

type handshakeStats struct {
	initiated, completed, answered, cookies, refused, rateLimited atomic.Uint64
	// cookiesCapped counts initiations from unknown sources left without
	// a cookie reply over cookieReplyCap.
	cookiesCapped atomic.Uint64
}

// peer is the core's view of a configured peer. Guarded by Core.mu.
type peer struct {
	id       shard.PeerID
	cfg      config.Peer
	cp       *crypto.Peer
	endpoint netip.AddrPort
	// known are p's addresses in Core.known: the configured Endpoint's
	// and the latest a handshake proved p receives at (setKnown).
	known [knownSlots]netip.Addr
	// lens samples the data lengths the peer's lanes send (they all get
	// it in LaneConfig.Lens); our handshake messages to the peer draw
	// their lengths from it (crypto.Peer.SetWireLengths).
	lens *shard.WireLens
	// bursts is the loss bursts the peer's lanes measured on its path
	// (they all get it in LaneConfig.Bursts).
	bursts *fec.PathBursts

	want      bool // traffic waits for a session
	wantSince time.Time
	init      *crypto.Initiation
	initIndex uint32
	initTo    netip.AddrPort // where init was sent (its byEndpoint key)
	initAt    time.Time
	initSent  time.Time // when init left (initAt is the tick that made it)
	respReads bucket    // responses read for init (forgeries cost DH)
	attempts  int
	fromLane  int // the lane socket this handshake's initiations leave from
	nextTry   time.Time

	sess        *crypto.Session
	sessAt      time.Time
	rekeyJitter time.Duration // added to the rekey time of this session
	lanes       int
	remoteIP    netip.Addr
	initiator   bool
	lastHS      time.Time
	nHS         uint64
	// mismatchWarned: a lane of the peer reported datagrams framed by the
	// previous wire version (PeerSilent), and the WARN saying so went out;
	// once per peer while it stays configured.
	mismatchWarned bool
	// failing: our initiations to the peer went unanswered
	// failWarnAttempts times and a WARN said so; a completed handshake
	// clears it (and says so).
	failing bool
	// rtt is the last handshake's round trip as its initiator, from
	// initiation to response (0: we answered it); the lanes' FEC aims
	// for less residual loss on longer paths.
	rtt time.Duration
	// endpointLane is the lane whose remote is the endpoint (the
	// responder's: the initiator's lane whose socket sent the
	// initiation; the initiator's: any, 0), so its move moves the
	// endpoint.
	endpointLane int
	// gen counts changes of sess (install, dropSession): an initiation
	// decided under the lock is sent only if gen did not move while its
	// message was made outside it (sendInitiations).
	gen uint64
	// place[i] is the shard that owns lane i, as the data plane placed
	// it (shard.Placement) or moved it since (the lane's datagrams
	// proved to arrive elsewhere: a NAT rewrote its port; see
	// shard/place.go). Kept across rekeys.
	place []int
}

// New makes a core with no peers; SetPeers adds them.
func New(d Deps) *Core {
	c := &Core{
		local: d.Local, dp: d.Plane, log: d.Log, now: d.Now, rnd: d.Rand,
		rekeyAfter: d.RekeyAfter, shards: d.Plane.Size(), fecMode: d.FEC,
		cookies: crypto.NewCookieChecker(),
		peers:   map[crypto.PublicKey]*peer{}, byID: map[shard.PeerID]*peer{},
		pending: map[uint32]*peer{}, nextID: 1,
		byEndpoint: map[netip.AddrPort][]*crypto.Initiation{},
		knownRefs:  map[netip.Addr]int{},
		limit:      newLimiter(sourcePrefix), proven: newLimiter(provenKey),
		keyLog: d.KeyLog,
		events: newEventQueue(),
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.rnd == nil {
		c.rnd = sysRandom{}
	}
	if c.rekeyAfter <= 0 {
		c.rekeyAfter = DefaultRekeyAfter
	}
	return c
}

// SetFEC sets the FEC mode of lanes installed from now on (SIGHUP).
func (c *Core) SetFEC(m fec.Mode) {
	c.mu.Lock()
	c.fecMode = m
	c.mu.Unlock()
}

// fecConfig is the starting encoder ratio for a new lane. Caller holds mu.
func (c *Core) fecConfig() (fec.EncoderConfig, fec.Mode) {
	m := c.fecMode
	a, err := fec.NewAdapter(m, fec.AdaptConfig{})
	if err != nil {
		return fec.EncoderConfig{K: 16, R: 0}, fec.Mode{Kind: fec.ModeOff}
	}
	k, rr := a.Ratio()
	return fec.EncoderConfig{K: k, R: rr, FirstGroup: c.rnd.Uint32()}, m
}

// setEndpoint changes where p's handshakes go. Caller holds mu.
func (c *Core) setEndpoint(p *peer, ep netip.AddrPort) { p.endpoint = ep }

// Which of a peer's addresses a known slot holds (peer.known).
const (
	knownConfigured = iota // the configured Endpoint's (or its name's)
	knownProven            // the latest one a handshake proved
	knownSlots
)

// setKnown puts a in p's known slot and keeps the set of known addresses
// in step: O(1), where rebuilding the set on every handshake made a
// 10,000-peer hub spend half its CPU on it; peers behind one address
// (a NAT) count each. A zero a empties the slot. Caller holds mu.
func (c *Core) setKnown(p *peer, slot int, a netip.Addr) {
	old := p.known[slot]
	if old == a {
		return
	}
	p.known[slot] = a
	if old.IsValid() {
		if c.knownRefs[old]--; c.knownRefs[old] <= 0 {
			delete(c.knownRefs, old)
			c.known.Delete(old)
			c.tellKnown(old, false)
		}
	}
	if a.IsValid() {
		if c.knownRefs[a]++; c.knownRefs[a] == 1 {
			c.known.Store(a, struct{}{})
			c.tellKnown(a, true)
		}
	}
}

// tellKnown passes a change of the known set to the data plane, which
// queues known addresses' handshakes apart from strangers' (one bpf(2)
// call, only when an address enters or leaves the set). A refusal is
// logged once and tried again by the timers. Caller holds mu.
func (c *Core) tellKnown(a netip.Addr, known bool) {
	err := c.dp.SetKnown(a, known)
	if err == nil {
		delete(c.knownRetry, a)
		return
	}
	if _, again := c.knownRetry[a]; !again {
		c.log.Warn("cannot give a peer's address a queue apart from strangers' (its handshakes queue with theirs until it can)",
			zap.Stringer("address", a), zap.Bool("known", known), zap.Error(err))
	}
	if c.knownRetry == nil {
		c.knownRetry = map[netip.Addr]bool{}
	}
	c.knownRetry[a] = known
}

// knownRetries bounds the refused changes retryKnownLocked tries per run
// of the timers: a full map would otherwise cost a system call per
// address each time.
const knownRetries = 64

// retryKnownLocked tries again the changes of the known set the data
// plane refused. Caller holds mu.
func (c *Core) retryKnownLocked() {
	n := 0
	for a, known := range c.knownRetry {
		if n == knownRetries {
			return
		}
		n++
		if c.dp.SetKnown(a, known) == nil {
			delete(c.knownRetry, a)
		}
	}
}
