package router

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/tun"
	"github.com/yip-router/yip-router/shard/udp"
)

// Session timing. Rekey and handshake timeout are WireGuard's values; a
// session is rejected after 3 × the rekey interval (360 s; WireGuard: 180 s),
// so a responder whose initiator went quiet keeps the session while it
// re-initiates itself (at 1.25 × rekey).
const (
	// DefaultRekeyAfter is when the initiator of a session starts a new
	// handshake.
	DefaultRekeyAfter = 120 * time.Second
	// rejectAfter is when a session that was not renewed is torn down.
	rejectAfterFactor = 3
	// handshakeTimeout is how long an initiation waits for its response.
	handshakeTimeout = 5 * time.Second
	// timerPeriod is how often the control-plane timers run.
	timerPeriod = 250 * time.Millisecond
	// cookieThreshold: initiations per second above which the responder
	// demands cookies (each costs ~72 µs of DH: 500/s is ~4% of a core).
	cookieThreshold = 500
	// cookieReplyCap: cookie replies per second, router-wide, to sources
	// that are no peer's known address. Under a flood of spoofed
	// initiations every reply costs the receiving data shard a seal and a
	// sendto; past the cap such sources get silence (a real initiator
	// from an unknown address retries on its schedule). Known addresses
	// always get theirs.
	cookieReplyCap = 2000
)

// Conn indexes of a shard's sockets.
const (
	connGroup = 0 // the SO_REUSEPORT group member on ListenPort
	connLane  = 1 // the shard's lane socket (port low bits = shard)
)

// Options are the command-line overrides and test knobs.
type Options struct {
	// ShardsSet overrides the config's Shards with ShardsAuto/Shards.
	ShardsSet  bool
	ShardsAuto bool
	Shards     int
	Log        *zap.Logger
	// RekeyAfter overrides DefaultRekeyAfter (tests: env YIP_TEST_REKEY_AFTER).
	RekeyAfter time.Duration
	// Sys is the sysfs root for CPU topology ("/sys").
	Sys string
}

// Router is one running yip-router: TUN device, shards and control plane.
type Router struct {
	cfg     *config.Config
	opts    Options
	log     *zap.Logger
	local   *crypto.Local
	cookies *crypto.CookieChecker
	dev     *tun.Device
	cpus    []int
	group   []*udp.Conn
	laneSk  []*udp.Conn
	mesh    *shard.Mesh
	shards  []*shard.Shard
	table   atomic.Pointer[shard.Table]
	started atomic.Int64 // Start's time (Unix ns): Status may run before Start
	// known holds every peer's endpoint address (configured or learnt
	// from a completed handshake), read lock-free by the shards' cookie
	// path; setEndpoint keeps it in step under mu.
	known     sync.Map           // netip.Addr → struct{}; lock-free reads
	knownRefs map[netip.Addr]int // peers per known address, under mu
	// replySlot and replyCount count cookie replies to unknown sources
	// in the current second (cookieReplyCap).
	replySlot, replyCount atomic.Int64
	// offDisabled is the config's DisableOffload at start (a reload
	// cannot change offloads).
	offDisabled config.OffloadSet
	// resMu guards the sockets and the TUN device against closeResources
	// while kernelDrops reads their counters; resClosed says they are gone.
	resMu     sync.RWMutex
	resClosed bool

	mu      sync.Mutex
	peers   map[crypto.PublicKey]*peer
	byID    map[shard.PeerID]*peer
	nextID  shard.PeerID
	pending map[uint32]*peer // our initiation index → peer

	npending atomic.Int32 // len(pending), read without the lock
	// pendMu guards byEndpoint: our pending initiations by the endpoint
	// they were sent to, so a cookie reply (or junk of its length) finds
	// its candidates in O(1) without the router lock. Lock order: mu, then
	// pendMu.
	pendMu     sync.Mutex
	byEndpoint map[netip.AddrPort][]*crypto.Initiation
	// cookieScans counts pending initiations tried against cookie replies.
	cookieScans atomic.Uint64
	limit       *limiter      // initiations answered without a cookie, per source prefix
	proven      *limiter      // initiations with a valid mac2, per source prefix
	initCount   atomic.Uint64 // initiations received this second
	initSlot    atomic.Int64
	hs          handshakeStats

	// testSend replaces the sockets for handshake datagrams in in-memory
	// tests; nil in a real router.
	testSend func(sh, conn int, b []byte, to netip.AddrPort) error

	stop    chan struct{}
	wg      sync.WaitGroup
	runErrs chan error
}

type handshakeStats struct {
	initiated, completed, answered, cookies, refused, rateLimited atomic.Uint64
	// cookiesCapped counts initiations from unknown sources left without
	// a cookie reply over cookieReplyCap.
	cookiesCapped atomic.Uint64
}

// peer is the control plane's view of a configured peer. Guarded by
// Router.mu.
type peer struct {
	id       shard.PeerID
	cfg      config.Peer
	cp       *crypto.Peer
	endpoint netip.AddrPort

	want      bool // traffic waits for a session
	wantSince time.Time
	init      *crypto.Initiation
	initIndex uint32
	initTo    netip.AddrPort // where init was sent (its byEndpoint key)
	initAt    time.Time
	respReads bucket // responses read for init (forgeries cost DH)
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
	// endpointLane is the lane whose remote is the endpoint (the
	// responder's: the initiator's lane whose socket sent the
	// initiation; the initiator's: any, 0), so its move moves the
	// endpoint.
	endpointLane int
	// place[i] is the shard that owns lane i: i, unless the lane's
	// datagrams proved to arrive elsewhere (a NAT rewrote its port; see
	// shard/place.go) and it was moved there. Kept across rekeys.
	place []int
}

func (r *Router) rekeyAfter() time.Duration {
	if r.opts.RekeyAfter > 0 {
		return r.opts.RekeyAfter
	}
	return DefaultRekeyAfter
}

// New sets the router up: CPUs, TUN device, sockets, shards and peers. It
// starts nothing; Start does.
func New(cfg *config.Config, opts Options) (*Router, error) {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Sys == "" {
		opts.Sys = "/sys"
	}
	if opts.RekeyAfter == 0 {
		if v := os.Getenv("YIP_TEST_REKEY_AFTER"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("YIP_TEST_REKEY_AFTER: %w", err)
			}
			opts.RekeyAfter = d
		}
	}
	r := &Router{
		cfg: cfg, opts: opts, log: opts.Log,
		cookies: crypto.NewCookieChecker(),
		peers:   map[crypto.PublicKey]*peer{}, byID: map[shard.PeerID]*peer{},
		pending: map[uint32]*peer{}, nextID: 1,
		byEndpoint: map[netip.AddrPort][]*crypto.Initiation{},
		knownRefs:  map[netip.Addr]int{},
		stop:       make(chan struct{}),
		limit:      newLimiter(), proven: newLimiter(),
	}
	ok := false
	defer func() {
		if !ok {
			r.closeResources()
		}
	}()

	mask, err := AffinityCPUs()
	if err != nil {
		return nil, err
	}
	auto, n := cfg.Interface.ShardsAuto, cfg.Interface.Shards
	if opts.ShardsSet {
		auto, n = opts.ShardsAuto, opts.Shards
	}
	if r.cpus, err = ChooseCPUs(mask, auto, n, opts.Sys); err != nil {
		return nil, err
	}
	nsh := len(r.cpus)

	r.local = crypto.NewLocal(cfg.Interface.PrivateKey, true)
	off := cfg.Interface.DisableOffload
	r.offDisabled = off
	want := tun.Offloads{TSO: !off.TSO, USO: !off.USO}
	want.VnetHdr = want.TSO || want.USO || !off.GRO
	if r.dev, err = tun.Open(cfg.Interface.Name, nsh, want); err != nil {
		return nil, err
	}
	bind := cfg.Interface.ListenAddress
	if !bind.IsValid() {
		bind = netip.IPv6Unspecified()
	}
	r.group, err = udp.ListenGroup(netip.AddrPortFrom(bind, cfg.Interface.ListenPort), nsh)
	if udp.NoIPv6(err) && bind == netip.IPv6Unspecified() {
		// A kernel without IPv6 (ipv6.disable=1): IPv4 only.
		r.log.Warn("no IPv6 in this kernel: listening on IPv4 only")
		bind = netip.IPv4Unspecified()
		r.group, err = udp.ListenGroup(netip.AddrPortFrom(bind, cfg.Interface.ListenPort), nsh)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range cfg.Peers {
		if err := sameFamily(p, bind); err != nil {
			return nil, err
		}
	}
	if cfg.Interface.ListenPort == 0 {
		// Loud when a peer evidently needs a fixed port: it has no
		// Endpoint (only it can start a handshake), or it listens on the
		// old default 51820 and so likely expects us there too.
		log := r.log.Info
		for _, p := range cfg.Peers {
			if !p.Endpoint.IsValid() || p.Endpoint.Port() == 51820 {
				log = r.log.Warn
			}
		}
		log("no ListenPort (there is no default; it used to be 51820): listening on a port the kernel picked for this run, "+
			"which a peer that has this router as its Endpoint cannot know: set ListenPort if one does",
			zap.Uint16("port", r.group[0].LocalAddr().Port()))
	}
	for i := range nsh {
		c, err := udp.ListenLane(bind, i, randIntn)
		if err != nil {
			return nil, err
		}
		r.laneSk = append(r.laneSk, c)
	}
	for _, c := range r.conns() {
		c.EnableOffloads(!off.UDPGSO, !off.UDPGRO)
	}
	if r.mesh, err = shard.NewMesh(nsh); err != nil {
		return nil, err
	}
	for i := range nsh {
		s, err := shard.New(shard.Config{
			ID: i, CPU: r.cpus[i], TUN: r.dev.Queues[i],
			Conns: []*udp.Conn{r.group[i], r.laneSk[i]},
			Mesh:  r.mesh, Table: &r.table,
			Unmatched: r.unmatched,
			NoSession: r.noSession,
			Moved:     r.peerMoved,
			Silent:    r.peerSilent,
			Misplaced: r.laneMisplaced,
			// Writing TCP superpackets needs only the header; UDP ones
			// need a kernel with USO, which the device's grant proves.
			CoalesceTCP: r.dev.Offloads.VnetHdr && !off.GRO,
			CoalesceUDP: r.dev.Offloads.USO && !off.GRO,
		})
		if err != nil {
			return nil, err
		}
		r.shards = append(r.shards, s)
	}
	if err := r.setPeers(cfg.Peers); err != nil {
		return nil, err
	}
	var routes []netip.Prefix
	for _, p := range cfg.Peers {
		routes = append(routes, p.AllowedIPs...)
	}
	if err := configureLink(r.dev.Name, cfg.Interface.MTU, cfg.Interface.Addresses, routes); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// randIntn is for retry jitter and lane port choice, which need spread,
// not secrecy.
func randIntn(n int) int { return mrand.IntN(n) }

func randUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// setPeers installs the configured peers and the route table built from
// their AllowedIPs. Peers whose key and PSK are unchanged keep their
// sessions (SIGHUP).
func (r *Router) setPeers(pcs []config.Peer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := map[crypto.PublicKey]bool{}
	var routes []shard.Route
	var fresh []crypto.PublicKey
	for _, pc := range pcs {
		if r.peers[pc.PublicKey] == nil {
			fresh = append(fresh, pc.PublicKey)
		}
	}
	r.local.Prepare(fresh)
	for _, pc := range pcs {
		keep[pc.PublicKey] = true
		p := r.peers[pc.PublicKey]
		if p == nil || p.cfg.PresharedKey != pc.PresharedKey {
			cp, err := r.local.AddPeer(pc.PublicKey, pc.PresharedKey)
			if err != nil {
				return fmt.Errorf("peer at line %d: %w", pc.Line, err)
			}
			if p != nil {
				r.dropSession(p)
			} else {
				p = &peer{id: r.nextID}
				r.nextID++
				r.peers[pc.PublicKey] = p
				r.byID[p.id] = p
			}
			p.cp = cp
		}
		was, wasKA := p.cfg.Endpoint, p.cfg.PersistentKeepalive
		p.cfg = pc
		if pc.PersistentKeepalive != wasKA && p.sess != nil {
			id, ka := p.id, pc.PersistentKeepalive
			for _, s := range r.shards {
				s.Do(func(x *shard.Shard) { x.SetKeepalive(id, ka) })
			}
		}
		switch {
		case pc.Endpoint.IsValid() && !p.endpoint.IsValid():
			r.setEndpoint(p, pc.Endpoint)
		case pc.Endpoint.IsValid() && was.IsValid() && pc.Endpoint != was && pc.Endpoint != p.endpoint:
			// The operator moved the peer: handshakes go there, and so
			// do the lanes that talk to its endpoint (as initiator, all
			// of them); the peer's lanes follow our datagrams' new
			// source on their side (roaming).
			r.log.Info("peer endpoint changed", zap.String("peer", pc.PublicKey.String()), zap.Stringer("from", p.endpoint), zap.Stringer("to", pc.Endpoint))
			from, to, id := p.endpoint, pc.Endpoint, p.id
			r.setEndpoint(p, to)
			for _, s := range r.shards {
				s.Do(func(x *shard.Shard) { x.MoveRemote(id, from, to) })
			}
		}
		for _, pfx := range pc.AllowedIPs {
			routes = append(routes, shard.Route{Prefix: pfx, Peer: p.id})
		}
	}
	for k, p := range r.peers {
		if !keep[k] {
			// Lanes or not, shards may hold packets waiting for it.
			r.clearInit(p)
			r.forget(p.id)
			r.local.RemovePeer(k)
			r.setEndpoint(p, netip.AddrPort{})
			delete(r.peers, k)
			delete(r.byID, p.id)
		}
	}
	r.table.Store(shard.NewTable(routes))
	return nil
}

// dropSession forgets p's session and lanes. Caller holds r.mu.
func (r *Router) dropSession(p *peer) {
	if p.sess == nil {
		return
	}
	p.sess = nil
	p.place = nil
	r.forget(p.id)
}

// forget tells every shard to drop peer id's lanes and waiting packets.
func (r *Router) forget(id shard.PeerID) {
	for _, s := range r.shards {
		s.Do(func(sh *shard.Shard) { sh.RemovePeer(id) })
	}
}

// Start runs the shards and the timers.
func (r *Router) Start() {
	r.started.Store(time.Now().UnixNano())
	r.runErrs = make(chan error, len(r.shards))
	for _, s := range r.shards {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := s.Run(); err != nil {
				r.runErrs <- err
			}
		}()
	}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.timers()
	}()
	go func() {
		defer r.wg.Done()
		r.watchOffloads()
	}()
	r.log.Info("router started",
		zap.String("interface", r.dev.Name), zap.Ints("cpus", r.cpus), zap.Int("shards", len(r.shards)),
		zap.Uint16("listen_port", r.group[0].LocalAddr().Port()), zap.Int("peers", len(r.cfg.Peers)),
		zap.String("public_key", r.local.PublicKey().String()), zap.Any("offloads", r.offloadState()))
}

// Errors reports shard failures: a shard whose loop stopped with an error
// sends it here (buffered, one per shard). The channel is never closed.
func (r *Router) Errors() <-chan error { return r.runErrs }

// Close stops the shards and timers and releases the TUN device (which the
// kernel then removes) and the sockets.
func (r *Router) Close() error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	close(r.stop)
	for _, s := range r.shards {
		s.Stop()
	}
	r.wg.Wait()
	r.closeResources()
	r.log.Info("router stopped")
	return nil
}

func (r *Router) closeResources() {
	// A status request (control socket, metrics scrape) may still be
	// reading the sockets' kernel counters: wait for it.
	r.resMu.Lock()
	defer r.resMu.Unlock()
	r.resClosed = true
	if r.mesh != nil {
		r.mesh.Close()
	}
	for _, c := range r.conns() {
		c.Close()
	}
	if r.dev != nil {
		r.dev.Close()
	}
}

// sameFamily refuses a peer Endpoint the underlay sockets bound to bind
// cannot reach: sockets bound to :: carry both families, any other
// address one.
func sameFamily(p config.Peer, bind netip.Addr) error {
	if bind == netip.IPv6Unspecified() || !p.Endpoint.IsValid() || p.Endpoint.Addr().Is6() == bind.Is6() {
		return nil
	}
	return fmt.Errorf("peer at line %d: Endpoint %s is %s but the underlay sockets are bound to %s (ListenAddress = :: or unset carries both families)",
		p.Line, p.Endpoint, map[bool]string{true: "IPv6", false: "IPv4"}[p.Endpoint.Addr().Is6()], bind)
}

// ErrReloadPartial marks a Reload error after part of the new configuration
// was applied (the peers, not the routes): the running configuration is
// then neither the old one nor the new one.
var ErrReloadPartial = errors.New("reload partly applied")

// Reload applies a new configuration's peers, routes and FEC mode (SIGHUP).
// A change to PrivateKey, ListenPort, Name or MTU refuses the whole reload
// (nothing is applied). Address, ListenAddress, Shards, MetricsListen and
// DisableOffload are not applied either but do not block the rest: they are returned so the
// caller can say they need a restart. The peers are checked whole before
// any is applied.
func (r *Router) Reload(cfg *config.Config) (needRestart []string, err error) {
	old := r.cfg.Interface
	nw := cfg.Interface
	var refuse []string
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"PrivateKey", old.PrivateKey != nw.PrivateKey}, {"ListenPort", old.ListenPort != nw.ListenPort},
		{"Name", old.Name != nw.Name}, {"MTU", old.MTU != nw.MTU},
	} {
		if c.changed {
			refuse = append(refuse, c.name)
		}
	}
	if len(refuse) > 0 {
		return nil, fmt.Errorf("reload: changing [Interface] %s needs a restart", strings.Join(refuse, ", "))
	}
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"Address", !slices.Equal(old.Addresses, nw.Addresses)},
		{"ListenAddress", old.ListenAddress != nw.ListenAddress},
		{"Shards", old.ShardsAuto != nw.ShardsAuto || old.Shards != nw.Shards},
		{"MetricsListen", old.MetricsListen != nw.MetricsListen},
		{"DisableOffload", old.DisableOffload != nw.DisableOffload},
	} {
		if c.changed {
			needRestart = append(needRestart, c.name)
		}
	}
	bind := r.group[0].LocalAddr().Addr()
	for _, pc := range cfg.Peers {
		if err := r.local.CheckPeerKey(pc.PublicKey); err != nil {
			return needRestart, fmt.Errorf("reload: peer at line %d: %w", pc.Line, err)
		}
		if err := sameFamily(pc, bind); err != nil {
			return needRestart, fmt.Errorf("reload: %w", err)
		}
	}
	// What runs: the new peers and FEC mode, the old interface otherwise.
	run := *cfg
	run.Interface = old
	run.Interface.FEC = nw.FEC
	var oldRoutes, newRoutes []netip.Prefix
	for _, p := range r.cfg.Peers {
		oldRoutes = append(oldRoutes, p.AllowedIPs...)
	}
	for _, p := range cfg.Peers {
		newRoutes = append(newRoutes, p.AllowedIPs...)
	}
	if err := r.setPeers(cfg.Peers); err != nil {
		return needRestart, fmt.Errorf("%w: %w", ErrReloadPartial, err)
	}
	r.mu.Lock()
	r.cfg = &run
	r.mu.Unlock()
	add, del := diffPrefixes(oldRoutes, newRoutes)
	if len(add)+len(del) > 0 {
		if err := replaceRoutes(r.dev.Name, add, del); err != nil {
			return needRestart, fmt.Errorf("%w: peers applied, routes not: %w", ErrReloadPartial, err)
		}
	}
	r.log.Info("configuration reloaded", zap.Int("peers", len(cfg.Peers)), zap.Int("routes_added", len(add)), zap.Int("routes_removed", len(del)))
	return needRestart, nil
}

func diffPrefixes(old, nw []netip.Prefix) (add, del []netip.Prefix) {
	o, n := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for _, p := range old {
		o[p] = true
	}
	for _, p := range nw {
		n[p] = true
		if !o[p] {
			add = append(add, p)
		}
	}
	for _, p := range old {
		if !n[p] {
			del = append(del, p)
		}
	}
	return add, del
}

// fecConfig is the starting encoder ratio for a new lane.
func (r *Router) fecConfig() (fec.EncoderConfig, fec.Mode) {
	m := r.cfg.Interface.FEC
	a, err := fec.NewAdapter(m, fec.AdaptConfig{})
	if err != nil {
		return fec.EncoderConfig{K: 16, R: 0}, fec.Mode{Kind: fec.ModeOff}
	}
	k, rr := a.Ratio()
	return fec.EncoderConfig{K: k, R: rr, FirstGroup: randUint32()}, m
}

// Name is the TUN interface's name.
func (r *Router) Name() string { return r.dev.Name }

// CPUs are the CPUs the shards are pinned to, shard i on CPUs()[i].
func (r *Router) CPUs() []int { return r.cpus }
