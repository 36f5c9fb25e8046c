package router

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/cpuplan"
	"github.com/yip-router/yip-router/internal/fulltunnel"
	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/tun"
	"github.com/yip-router/yip-router/shard/udp"
)

// Options are the command-line overrides and test knobs.
type Options struct {
	// Shards overrides the config's Shards (--shards); nil keeps it.
	Shards *config.Shards
	Log    *zap.Logger
	// RekeyAfter overrides DefaultRekeyAfter (tests: env YIP_TEST_REKEY_AFTER).
	RekeyAfter time.Duration
	// SteerByPort skips the eBPF steering as if the kernel refused it
	// (tests of the fallback: env YIP_TEST_STEER_BY_PORT=1).
	SteerByPort bool
	// Sys is the sysfs root for CPU topology ("/sys").
	Sys string
	// ResolveEvery overrides DefaultResolveEvery, how often Endpoint host
	// names are looked up again (tests: env YIP_TEST_RESOLVE_EVERY).
	ResolveEvery time.Duration
	// LogSampled counts the log lines Log's sampling left out (Status,
	// yip_log_lines_sampled_total); nil: none are.
	LogSampled func() uint64
}

// Router is one running yip-router: TUN device, sockets, shards, and the
// control plane's core wired to them.
type Router struct {
	cfg *config.Config // the running configuration (Reload replaces it under reloadMu)
	// reloadMu makes reloads one at a time.
	reloadMu sync.Mutex
	opts     Options
	log      *zap.Logger
	local    *crypto.Local
	core     *control.Core
	dev      *tun.Device
	cpus     []int
	group    []*udp.Conn
	laneSk   []*udp.Conn
	// steer is the group's lane map (nil: the kernel refused eBPF and
	// the group steers by source port); steerMode says which, for show.
	steer     *udp.Steering
	steerMode string
	// plane is the shards as one data plane: their mesh, route table
	// and steering (the core's DataPlane).
	plane *shard.Group
	// strangers are the listen group's strangers' sockets, one per shard
	// (nil when the group steers by port): receive-only, read by the
	// shards within a budget (shard.Config.Strangers).
	strangers []*udp.Conn
	// known are the listen group's known sockets, one per shard (nil
	// with strangers): unsteered datagrams from addresses peers are
	// known at (shard.Config.Known).
	known []*udp.Conn
	// resolver looks the peers' Endpoint host names up again.
	resolver *resolver
	shards   []*shard.Shard // plane.Shards()
	started  atomic.Int64   // Start's time (Unix ns): Status may run before Start
	// offDisabled is the config's DisableOffload at start (a reload
	// cannot change offloads).
	offDisabled config.OffloadSet
	// keyLog is the file YIP_KEYLOG names (control/keylog.go), or nil.
	keyLog *os.File
	// iface is the config's [Interface] at start, for what a reload
	// cannot change (Padding and the TUN MTU): read without reloadMu.
	iface config.Interface
	// mark is the firewall mark on every underlay socket: FwMark, or a
	// full tunnel's (fulltunnel.ChooseMark); 0 for none.
	mark uint32
	// full is the full tunnel's rules and routes (nil: none), removed by
	// closeResources; fullFamilies names its families for status (fixed
	// at start: a reload may not change them).
	full         *fulltunnel.Tunnel
	fullFamilies []string
	// isUp says PostUp ran to its end (Start): only then do PreDown and
	// PostDown run, as with wg-quick.
	isUp atomic.Bool
	// resMu guards the sockets and the TUN device against closeResources
	// while kernelDrops reads their counters; resClosed says they are gone.
	resMu     sync.RWMutex
	resClosed bool

	stop    chan struct{}
	wg      sync.WaitGroup
	runErrs chan error
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
	if opts.ResolveEvery == 0 {
		if v := os.Getenv("YIP_TEST_RESOLVE_EVERY"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("YIP_TEST_RESOLVE_EVERY: %q is not a positive duration", v)
			}
			opts.ResolveEvery = d
		}
	}
	if os.Getenv("YIP_TEST_STEER_BY_PORT") == "1" {
		opts.SteerByPort = true
	}
	r := &Router{cfg: cfg, opts: opts, log: opts.Log, stop: make(chan struct{}), iface: cfg.Interface}
	ok := false
	defer func() {
		if !ok {
			r.closeResources()
		}
	}()

	if path := os.Getenv("YIP_KEYLOG"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("YIP_KEYLOG: %w", err)
		}
		r.keyLog = f
		r.log.Warn("YIP_KEYLOG is set: every lane's framing keys (not its encryption keys) are written to it", zap.String("path", path))
	}
	mask, err := cpuplan.AffinityCPUs()
	if err != nil {
		return nil, err
	}
	shards := cfg.Interface.Shards
	if opts.Shards != nil {
		shards = *opts.Shards
	}
	if r.cpus, err = cpuplan.Choose(mask, shards, opts.Sys); err != nil {
		return nil, err
	}
	nsh := len(r.cpus)
	reserveProcs(nsh)

	r.local = crypto.NewLocal(cfg.Interface.PrivateKey, true)
	off := cfg.Interface.DisableOffload
	r.offDisabled = off
	want := tun.Offloads{TSO: !off.TSO, USO: !off.USO}
	want.VnetHdr = want.TSO || want.USO || !off.GRO
	preUpName, err := cfg.Interface.PreUpName()
	if err != nil {
		return nil, err
	}
	if err := runHooks(r.log, "PreUp", cfg.Interface.Hooks.PreUp, preUpName, false); err != nil {
		return nil, err
	}
	if r.dev, err = tun.Open(cfg.Interface.Name, nsh, want); err != nil {
		return nil, err
	}
	bind := cfg.Interface.ListenAddress
	if !bind.IsValid() {
		bind = netip.IPv6Unspecified()
	}
	r.group, err = r.listen(netip.AddrPortFrom(bind, cfg.Interface.ListenPort), nsh)
	if udp.NoIPv6(err) && bind == netip.IPv6Unspecified() {
		// A kernel without IPv6 (ipv6.disable=1): IPv4 only.
		r.log.Warn("no IPv6 in this kernel: listening on IPv4 only")
		bind = netip.IPv4Unspecified()
		r.group, err = r.listen(netip.AddrPortFrom(bind, cfg.Interface.ListenPort), nsh)
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
			if !p.HasEndpoint() || p.Endpoint.Port() == 51820 {
				log = r.log.Warn
			}
		}
		log("no ListenPort (there is no default; it used to be 51820): listening on a port the kernel picked for this run, "+
			"which a peer that has this router as its Endpoint cannot know: set ListenPort if one does",
			zap.Uint16("port", r.group[0].LocalAddr().Port()))
	}
	for range nsh {
		c, err := udp.ListenLane(bind)
		if err != nil {
			return nil, err
		}
		r.laneSk = append(r.laneSk, c)
	}
	for _, c := range r.conns() {
		c.EnableOffloads(!off.UDPGSO, !off.UDPGRO)
	}
	if err := r.markSockets(cfg); err != nil {
		return nil, err
	}
	if bind.IsUnspecified() {
		// Bound to every address: answer each peer from the address it
		// sent to, or a host with several addresses answers a peer
		// behind a stateful firewall from one it drops.
		for _, c := range slices.Concat(r.group, r.strangers, r.known) {
			if err := c.EnablePktinfo(); err != nil {
				r.log.Warn("cannot learn which local address a datagram was sent to: answers leave from the address the routing table picks, which a peer that sent to another of this host's addresses may drop", zap.Error(err))
				break
			}
		}
	}
	r.warnShortBuffers()
	refused := func(err error) { r.log.Error("install lane", zap.Error(err)) }
	if r.plane, err = shard.NewGroup(nsh, r.steerer(), refused); err != nil {
		return nil, err
	}
	r.core = control.New(control.Deps{Local: r.local, Plane: r.plane, Log: r.log,
		RekeyAfter: opts.RekeyAfter, FEC: cfg.Interface.FEC, KeyLog: keyLogWriter(r.keyLog)})
	c := r.core
	r.resolver = newResolver(r.lookup, bind, c, r.log, opts.ResolveEvery)
	for i := range nsh {
		if _, err := r.plane.Add(withCore(shard.Config{
			CPU: r.cpus[i], TUN: r.dev.Queues[i],
			Conns:     []shard.Socket{shard.ConnGroup: r.group[i], shard.ConnLane: r.laneSk[i]},
			Strangers: sockAt(r.strangers, i),
			Known:     sockAt(r.known, i),
			// Writing TCP superpackets needs only the header; UDP ones
			// need a kernel with USO, which the device's grant proves.
			CoalesceTCP: r.dev.Offloads.VnetHdr && !off.GRO,
			CoalesceUDP: r.dev.Offloads.USO && !off.GRO,
			Padding:     shardPadding(cfg.Interface),
		}, c)); err != nil {
			return nil, err
		}
	}
	r.shards = r.plane.Shards()
	if err := c.SetPeers(cfg.Peers); err != nil {
		return nil, err
	}
	if err := configureLink(r.dev.Name, cfg.Interface.TunMTU(), cfg.Interface.Addresses); err != nil {
		return nil, err
	}
	if err := r.route(cfg); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// Start runs the shards and the control loop (the core's lane events and
// timers), then the PostUp commands. A failed PostUp is returned; the
// caller then Closes the router, which runs no PreDown or PostDown (as
// wg-quick undoes a failed up).
func (r *Router) Start() error {
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
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		r.resolver.run(r.stop, r.peerConfigs)
	}()
	go func() {
		// The control loop: the shards' lane events as they come, the
		// timers every TimerPeriod.
		defer r.wg.Done()
		t := time.NewTicker(control.TimerPeriod)
		defer t.Stop()
		controlLoop(r.core, r.stop, t.C)
	}()
	go func() {
		defer r.wg.Done()
		r.watchOffloads()
	}()
	r.log.Info("router started",
		zap.String("interface", r.dev.Name), zap.Ints("cpus", r.cpus), zap.Int("shards", len(r.shards)),
		zap.Uint16("listen_port", r.group[0].LocalAddr().Port()), zap.Int("peers", len(r.cfg.Peers)),
		zap.String("public_key", r.local.PublicKey().String()), zap.Any("offloads", r.offloadState()))
	if err := runHooks(r.log, "PostUp", r.iface.Hooks.PostUp, r.dev.Name, false); err != nil {
		return err
	}
	r.isUp.Store(true)
	return nil
}

// peerConfigs is the running configuration's peers.
func (r *Router) peerConfigs() []config.Peer {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	return r.cfg.Peers
}

// Errors reports shard failures: a shard whose loop stopped with an error
// sends it here (buffered, one per shard). The channel is never closed.
func (r *Router) Errors() <-chan error { return r.runErrs }

// Close runs the PreDown commands, stops the shards and the control
// loop, removes a full tunnel's rules, releases the TUN device (which the
// kernel then removes, with its routes) and the sockets, and runs the
// PostDown commands. The down commands run only after a complete Start; their
// failures are logged.
func (r *Router) Close() error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	up := r.isUp.Load()
	if up {
		_ = runHooks(r.log, "PreDown", r.iface.Hooks.PreDown, r.dev.Name, true)
	}
	close(r.stop)
	for _, s := range r.shards {
		s.Stop()
	}
	r.wg.Wait()
	name := r.Name()
	r.closeResources()
	if up {
		_ = runHooks(r.log, "PostDown", r.iface.Hooks.PostDown, name, true)
	}
	r.log.Info("router stopped")
	return nil
}

func (r *Router) closeResources() {
	// A status request (control socket, metrics scrape) may still be
	// reading the sockets' kernel counters: wait for it.
	r.resMu.Lock()
	defer r.resMu.Unlock()
	r.resClosed = true
	// The rules first: with the device gone they would send the
	// family's traffic into an empty table, which falls through anyway,
	// but a rule that outlives its router is litter.
	if err := r.full.Down(); err != nil {
		r.log.Error("the full tunnel's policy rules stay behind: remove them by hand (ip rule; ip -6 rule)", zap.Error(err))
	}
	r.full = nil
	if r.plane != nil {
		r.plane.Close()
	}
	for _, c := range r.allSockets() {
		c.Close()
	}
	if r.dev != nil {
		r.dev.Close()
	}
	if r.keyLog != nil {
		r.keyLog.Close()
	}
	if r.steer != nil {
		r.steer.Close()
	}
}

// keyLogWriter is f as the core's KeyLog: nil stays a nil interface.
func keyLogWriter(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
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

// Name is the TUN interface's name.
func (r *Router) Name() string { return r.dev.Name }

// CPUs are the CPUs the shards are pinned to, shard i on CPUs()[i].
func (r *Router) CPUs() []int { return r.cpus }

// shardPadding is the shards' padding for the [Interface]: PadFull pads up
// to the longest datagram the MTU's budget allows, a parity datagram of the
// largest inner packet padded by crypto.PadHeadroom.
func shardPadding(ic config.Interface) shard.Padding {
	mode := map[config.Padding]shard.PadMode{
		config.PaddingOff: shard.PadOff, config.PaddingLight: shard.PadLight, config.PaddingFull: shard.PadFull,
	}[ic.Padding]
	return shard.Padding{Mode: mode, MaxWire: ic.TunMTU() + crypto.DataOverhead + 2 + crypto.PadHeadroom}
}
