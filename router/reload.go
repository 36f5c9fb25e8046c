package router

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/config"
)

// Reload (SIGHUP, yip-router reload): a new configuration's peers, routes
// and FEC mode applied to the running router, and the changes it refuses.

// ErrReloadPartial marks a Reload error after part of the new configuration
// was applied (the peers, not the routes): the running configuration is
// then neither the old one nor the new one.
var ErrReloadPartial = errors.New("reload partly applied")

// Reload applies a new configuration's peers, routes and FEC mode (SIGHUP).
// [Interface] settings a running router cannot change (PrivateKey,
// ListenPort, Name, MTU, Padding, Address, ListenAddress, Shards,
// MetricsListen, DisableOffload, Table, FwMark and the hooks: the running
// PreDown and PostDown are the ones that run at shutdown) keep their old
// values and are returned, so the caller can say they need a restart; the
// rest still applies. The peers, and the routes their new AllowedIPs need,
// are checked whole before anything is applied; a change that would start
// or end a full tunnel is refused (fullTunnelChange).
func (r *Router) Reload(cfg *config.Config) (needRestart []string, err error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	old := r.cfg.Interface
	nw := cfg.Interface
	// [Interface] settings a running router cannot change: reported, kept
	// at their old values until a restart, while the peers (and FEC) of
	// the same edit still apply.
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"PrivateKey", old.PrivateKey != nw.PrivateKey}, {"ListenPort", old.ListenPort != nw.ListenPort},
		{"Name", old.Name != nw.Name}, {"MTU", old.MTU != nw.MTU}, {"Padding", old.Padding != nw.Padding},
		{"Address", !slices.Equal(old.Addresses, nw.Addresses)},
		{"ListenAddress", old.ListenAddress != nw.ListenAddress},
		{"Shards", old.Shards != nw.Shards},
		{"MetricsListen", old.MetricsListen != nw.MetricsListen},
		{"DisableOffload", old.DisableOffload != nw.DisableOffload},
		{"Table", !old.Table.Same(nw.Table)}, {"FwMark", old.FwMark != nw.FwMark},
		{"PreUp", !slices.Equal(old.Hooks.PreUp, nw.Hooks.PreUp)}, {"PostUp", !slices.Equal(old.Hooks.PostUp, nw.Hooks.PostUp)},
		{"PreDown", !slices.Equal(old.Hooks.PreDown, nw.Hooks.PreDown)}, {"PostDown", !slices.Equal(old.Hooks.PostDown, nw.Hooks.PostDown)},
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
	if err := fullTunnelChange(r.cfg, &run); err != nil {
		return needRestart, fmt.Errorf("reload: %w", err)
	}
	var oldRoutes, newRoutes []netip.Prefix
	for _, p := range r.cfg.Peers {
		oldRoutes = append(oldRoutes, p.AllowedIPs...)
	}
	for _, p := range cfg.Peers {
		newRoutes = append(newRoutes, p.AllowedIPs...)
	}
	// A full tunnel's default routes are in both or in neither
	// (fullTunnelChange), so the difference has none of them.
	table := routeTable(old.Table)
	add, del := diffPrefixes(oldRoutes, newRoutes)
	if table == 0 {
		add, del = nil, nil
	}
	if len(add) > 0 {
		if err := routeConflicts(r.dev.Name, table, add); err != nil {
			return needRestart, fmt.Errorf("reload: %w", err)
		}
	}
	if err := r.core.SetPeers(cfg.Peers); err != nil {
		return needRestart, fmt.Errorf("%w: %w", ErrReloadPartial, err)
	}
	r.core.SetFEC(nw.FEC)
	r.cfg = &run
	if len(add)+len(del) > 0 {
		if err := replaceRoutes(r.dev.Name, table, add, del); err != nil {
			return needRestart, fmt.Errorf("%w: peers applied, routes not: %w", ErrReloadPartial, err)
		}
	}
	r.log.Info("configuration reloaded", zap.Int("peers", len(cfg.Peers)), zap.Int("routes_added", len(add)), zap.Int("routes_removed", len(del)))
	return needRestart, nil
}

// fullTunnelChange refuses a reload that would start or end a full
// tunnel for a family (a default route in some peer's AllowedIPs with
// Table = auto): its mark and policy rules are set up at start. Moving the
// default route from one peer to another is fine.
func fullTunnelChange(old, nw *config.Config) error {
	o4, o6 := old.FullTunnel()
	n4, n6 := nw.FullTunnel()
	for _, f := range []struct {
		name, prefix string
		was, is      bool
	}{{"IPv4", "0.0.0.0/0", o4, n4}, {"IPv6", "::/0", o6, n6}} {
		switch {
		case f.is && !f.was:
			return fmt.Errorf("a peer's AllowedIPs now hold %s, a full tunnel for %s, whose fwmark and policy rules are set up at start: restart the router to apply it", f.prefix, f.name)
		case f.was && !f.is:
			return fmt.Errorf("no peer's AllowedIPs hold %s any more, which ends the full tunnel for %s, whose fwmark and policy rules are set up at start: restart the router to apply it", f.prefix, f.name)
		}
	}
	return nil
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
