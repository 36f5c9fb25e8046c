package router

// Endpoint host names while the router runs. The config step looked each
// name up once at load time (config.ResolveEndpoint); a name that did not
// resolve left its peer without an address and a warning, not a failed
// start. From then on a resolver looks every name up again: each
// resolveEvery, each retry period while it has no address, and, after a
// retry period, whenever handshakes to its peer go unanswered (the name
// may point elsewhere by now). The control core decides what an address
// changes (control.Core.SetResolvedEndpoint): a working session keeps its
// address.

import (
	"context"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
)

// DefaultResolveEvery is how often a resolving Endpoint name is looked up
// again. A name without an address, or whose peer does not answer, is
// looked up again after a tenth of it.
const DefaultResolveEvery = 5 * time.Minute

// resolveTick is the longest wait between two looks at the names.
const resolveTick = 5 * time.Second

// endpointCore is what the resolver needs of the control core.
type endpointCore interface {
	HandshakesUnanswered(k crypto.PublicKey) bool
	SetResolvedEndpoint(k crypto.PublicKey, name config.HostPort, ep netip.AddrPort) bool
}

// nameState is one peer's Endpoint name as the resolver last saw it.
type nameState struct {
	name   config.HostPort
	last   time.Time // last lookup (or the config's, at load)
	ok     bool      // it gave an address
	warned bool      // a WARN said it does not resolve
}

// resolver looks Endpoint host names up again. Only its own goroutine
// uses it, apart from the counters.
type resolver struct {
	lookup config.Lookup
	family string // the sockets' family (config.FamilyOf)
	core   endpointCore
	log    *zap.Logger
	every  time.Duration
	names  map[crypto.PublicKey]*nameState
	// ok and failed count lookups since start by result (for show and
	// the metrics).
	ok, failed atomic.Uint64
}

func newResolver(lookup config.Lookup, bind netip.Addr, core endpointCore, log *zap.Logger, every time.Duration) *resolver {
	if every <= 0 {
		every = DefaultResolveEvery
	}
	return &resolver{lookup: lookup, family: config.FamilyOf(bind), core: core, log: log, every: every,
		names: map[crypto.PublicKey]*nameState{}}
}

// retry is the wait before a name without an address, or whose peer does
// not answer, is looked up again.
func (rs *resolver) retry() time.Duration { return rs.every / 10 }

// tick is how often run looks at the names.
func (rs *resolver) tick() time.Duration { return min(resolveTick, rs.retry()) }

// sweep looks up the names of peers that are due at now. peers is the
// running configuration's: a peer new to it, or whose name changed,
// starts from what its config lookup found (the warning for a name that
// did not resolve was the config's).
func (rs *resolver) sweep(ctx context.Context, now time.Time, peers []config.Peer) {
	seen := make(map[crypto.PublicKey]bool, len(rs.names))
	for _, pc := range peers {
		if pc.EndpointName.IsZero() {
			continue
		}
		seen[pc.PublicKey] = true
		st := rs.names[pc.PublicKey]
		if st == nil || st.name != pc.EndpointName {
			ok := pc.Endpoint.IsValid()
			st = &nameState{name: pc.EndpointName, last: now, ok: ok, warned: !ok}
			rs.names[pc.PublicKey] = st
			continue
		}
		age := now.Sub(st.last)
		due := age >= rs.every ||
			age >= rs.retry() && (!st.ok || rs.core.HandshakesUnanswered(pc.PublicKey))
		if due && ctx.Err() == nil {
			rs.resolve(ctx, now, pc.PublicKey, st)
		}
	}
	for k := range rs.names {
		if !seen[k] {
			delete(rs.names, k)
		}
	}
}

// resolve looks st's name up once and hands an address to the core. A
// failure keeps the peer's address (a resolver outage should not cut a
// working tunnel) and is a WARN the first time in a row.
func (rs *resolver) resolve(ctx context.Context, now time.Time, k crypto.PublicKey, st *nameState) {
	lctx, cancel := context.WithTimeout(ctx, config.LookupTimeout)
	ep, err := config.ResolveEndpoint(lctx, rs.lookup, st.name, rs.family)
	cancel()
	st.last = now
	if err != nil {
		rs.failed.Add(1)
		st.ok = false
		if ctx.Err() != nil {
			return // stopping
		}
		if !st.warned {
			st.warned = true
			rs.log.Warn("peer's Endpoint name does not resolve; keeping its last address and looking it up again",
				zap.String("peer", k.String()), zap.Stringer("name", st.name), zap.Duration("every", rs.retry()), zap.Error(err))
		} else {
			rs.log.Debug("peer's Endpoint name still does not resolve", zap.String("peer", k.String()), zap.Error(err))
		}
		return
	}
	if st.warned {
		st.warned = false
		rs.log.Info("peer's Endpoint name resolves again", zap.String("peer", k.String()),
			zap.Stringer("name", st.name), zap.Stringer("address", ep))
	}
	rs.ok.Add(1)
	st.ok = true
	rs.core.SetResolvedEndpoint(k, st.name, ep)
}

// run sweeps every tick until stop closes. peers returns the running
// configuration's peers.
func (rs *resolver) run(stop <-chan struct{}, peers func() []config.Peer) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	t := time.NewTicker(rs.tick())
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			rs.sweep(ctx, now, peers())
		}
	}
}
