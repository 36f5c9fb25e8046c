package router

import (
	"net/netip"

	"slices"
	"strconv"
	"time"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/shard"
)

// Status is what `yip-router show` prints (and --json emits).
type Status struct {
	Interface  string          `json:"interface"`
	PublicKey  string          `json:"public_key"`
	ListenPort uint16          `json:"listen_port"`
	Uptime     time.Duration   `json:"uptime_ns"`
	Shards     []ShardStatus   `json:"shards"`
	Peers      []PeerStatus    `json:"peers"`
	Handshakes HandshakeCounts `json:"handshakes"`
	// Offloads maps each offload (tso, uso, gro, udp-gso, udp-gro) to
	// "on" or "off: why".
	Offloads map[string]string `json:"offloads"`
	Kernel   KernelDrops       `json:"kernel_drops"`
	// Padding is the [Interface] Padding mode; TunMTU the MTU it leaves
	// the TUN device.
	Padding string `json:"padding"`
	TunMTU  int    `json:"tun_mtu"`
	// Steering says how the listen group picks a shard for a datagram:
	// "by lane remote (eBPF)" or "by source port: why not eBPF".
	Steering string `json:"steering"`
	// FwMark is the mark on every underlay socket (FwMark, or a full
	// tunnel's; 0: none); FullTunnel the families whose default route
	// goes into table FwMark behind policy rules ("IPv4", "IPv6").
	FwMark     uint32   `json:"fwmark"`
	FullTunnel []string `json:"full_tunnel,omitempty"`
	// EndpointLookups counts the lookups of Endpoint host names since
	// start (the config's at load not included) by result.
	EndpointLookups EndpointLookups `json:"endpoint_lookups"`
	// ControlEventsDropped counts the shards' lane events that found the
	// control core's queue full (control.Core.EventsDropped): each of a
	// kind its shard repeats while its cause lasts.
	ControlEventsDropped uint64 `json:"control_events_dropped"`
	// LogLinesSampled counts the debug and info lines the log's sampling
	// left out (repeats of one message within a second; Options.LogSampled).
	LogLinesSampled uint64 `json:"log_lines_sampled"`
}

// EndpointLookups are the resolver's counts.
type EndpointLookups struct {
	OK     uint64 `json:"ok"`
	Failed uint64 `json:"failed"`
}

// ShardStatus is one shard's CPU and counters.
type ShardStatus struct {
	ID       int               `json:"id"`
	CPU      int               `json:"cpu"`
	Counters map[string]uint64 `json:"counters"`
}

// HandshakeCounts are the control plane's handshake figures.
type HandshakeCounts = control.Counts

// PeerStatus is one peer and its lanes.
type PeerStatus struct {
	PublicKey string `json:"public_key"`
	Endpoint  string `json:"endpoint,omitempty"`
	// EndpointName is the configured Endpoint when it is a host name
	// (host:port), looked up again while the router runs.
	EndpointName  string    `json:"endpoint_name,omitempty"`
	AllowedIPs    []string  `json:"allowed_ips"`
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	Handshakes    uint64    `json:"handshakes"`
	Initiator     bool      `json:"initiator"`
	RxBytes       uint64    `json:"rx_bytes"`
	TxBytes       uint64    `json:"tx_bytes"`
	RxPackets     uint64    `json:"rx_packets"`
	TxPackets     uint64    `json:"tx_packets"`
	FECRecovered  uint64    `json:"fec_recovered"`
	FECLost       uint64    `json:"fec_unrecovered"`
	// EndpointMoves counts the lanes moved to a new address by an
	// authenticated datagram (the peer roamed), over the session's lanes.
	EndpointMoves uint64 `json:"endpoint_moves"`
	// PersistentKeepalive is the peer's configured keepalive interval
	// (0 = off).
	PersistentKeepalive time.Duration `json:"persistent_keepalive_ns"`
	Lanes               []LaneStatus  `json:"lanes"`
}

// LaneStatus is one lane as its owning shard sees it.
type LaneStatus struct {
	Index  int    `json:"index"`
	Shard  int    `json:"shard"`
	Remote string `json:"remote"`
	// Local is the address of ours the lane sends from: the one the
	// peer's handshake was sent to, on a router listening on every
	// address ("" where the routing table picks).
	Local     string    `json:"local,omitempty"`
	RxPackets uint64    `json:"rx_packets"`
	TxPackets uint64    `json:"tx_packets"`
	RxBytes   uint64    `json:"rx_bytes"`
	TxBytes   uint64    `json:"tx_bytes"`
	LastRx    time.Time `json:"last_rx,omitzero"`
	FEC       string    `json:"fec"`
	Recovered uint64    `json:"fec_recovered"`
	Confirmed bool      `json:"confirmed"`
	PrevKeys  bool      `json:"prev_keys"`
	Moves     uint64    `json:"moves"`
	// Padded: what this lane sends is padded (Padding is on and the
	// peer reads padding; an older router does not).
	Padded bool `json:"padded"`
	// PeerReads is what the peer's last hello on this lane said it
	// reads (shard.FeatureNames): empty before its first hello, and from
	// a router older than hellos; absent (nil) from a daemon older than
	// this field. Without the delay echo (PeerEchoes) the lane has no
	// round trip and no loss split, and FEC = auto counts every loss the
	// peer reports as the channel's.
	PeerReads []string `json:"peer_reads"`
	// FECLossPct is the wire loss FEC = auto last acted on, % (absent
	// before the peer's first loss report, and for fixed FEC); Path is
	// what the lane's round trip says of the path's queue (clear, queued
	// or unknown), from RTTms, its latest sample, against RTTLeastMs.
	FECLossPct *float64 `json:"fec_loss_pct,omitempty"`
	// FECBurst is the mean length of a loss burst on the wire, in
	// datagrams, that it was sized for (1: independent loss), and
	// FECBurstMeasured whether the peer's reports measured it (until
	// they have lost enough, the rule assumes bursts); both absent with
	// FECLossPct.
	FECBurst         *float64 `json:"fec_burst,omitempty"`
	FECBurstMeasured bool     `json:"fec_burst_measured,omitempty"`
	Path             string   `json:"path,omitempty"`
	RTTms            float64  `json:"rtt_ms,omitempty"`
	RTTLeastMs       float64  `json:"rtt_least_ms,omitempty"`
	// Split is how the peer's last loss report split what this lane
	// sent by the queue it met (absent from an older peer);
	// QueueLimitMs the queue above which this lane counts the peer's
	// datagrams as queued.
	Split        *LossSplit `json:"loss_split,omitempty"`
	QueueLimitMs float64    `json:"queue_limit_ms,omitempty"`
}

// LossSplit is a loss report's split: datagrams the peer expected and
// lost while the path's queue stood low (clear) and high (queued).
type LossSplit struct {
	ClearExpected  uint32 `json:"clear_expected"`
	ClearLost      uint32 `json:"clear_lost"`
	QueuedExpected uint32 `json:"queued_expected"`
	QueuedLost     uint32 `json:"queued_lost"`
}

// Status collects the figures from every shard (each answers on its own
// goroutine, so the hot path takes no lock for it) and the peers.
func (r *Router) Status() Status {
	st := Status{
		Interface: r.dev.Name, PublicKey: r.local.PublicKey().String(),
		ListenPort: r.group[0].LocalAddr().Port(),
		Handshakes: r.core.Counts(),
		Offloads:   r.offloadState(), Kernel: r.kernelDrops(),
		Padding: r.iface.Padding.String(), TunMTU: r.iface.TunMTU(),
		Steering: r.steerMode, FwMark: r.mark, FullTunnel: r.fullFamilies,
		EndpointLookups:      EndpointLookups{OK: r.resolver.ok.Load(), Failed: r.resolver.failed.Load()},
		ControlEventsDropped: r.core.EventsDropped(),
	}
	if r.opts.LogSampled != nil {
		st.LogLinesSampled = r.opts.LogSampled()
	}
	if t := r.started.Load(); t != 0 {
		st.Uptime = time.Since(time.Unix(0, t))
	}
	// The shards answer on their own goroutines, and the lanes are grouped
	// by peer before the core's lock is taken: under it only the peers are
	// copied (Core.Peers, O(peers)), so `show` and scrapes do not hold the
	// lock that the handshake path takes for peers × lanes.
	lanes := map[shard.PeerID][]shard.LaneStatus{}
	for i, s := range r.shards {
		snap := s.Snapshot()
		c := map[string]uint64{}
		for _, k := range shard.Counters() {
			if v := snap.Get(k); v != 0 {
				c[k.String()] = v
			}
		}
		st.Shards = append(st.Shards, ShardStatus{ID: i, CPU: r.cpus[i], Counters: c})
		var ls []shard.LaneStatus
		if err := s.Query(func(sh *shard.Shard) { ls = sh.LaneStatuses() }, time.Second); err == nil {
			for _, l := range ls {
				lanes[l.Peer] = append(lanes[l.Peer], l)
			}
		}
	}
	for _, p := range r.core.Peers() {
		ps := PeerStatus{PublicKey: p.Config.PublicKey.String(), LastHandshake: p.LastHandshake, Handshakes: p.Handshakes,
			Initiator: p.Initiator, PersistentKeepalive: p.Config.PersistentKeepalive}
		if p.Endpoint.IsValid() {
			ps.Endpoint = p.Endpoint.String()
		}
		if n := p.Config.EndpointName; !n.IsZero() {
			ps.EndpointName = n.String()
		}
		for _, a := range p.Config.AllowedIPs {
			ps.AllowedIPs = append(ps.AllowedIPs, a.String())
		}
		if p.Session {
			for _, l := range lanes[p.ID] {
				ls := LaneStatus{
					Index: l.Index, Shard: l.Shard, Remote: l.Remote.String(), Local: addrString(l.Local),
					RxPackets: l.RxPackets, TxPackets: l.TxPackets, RxBytes: l.RxBytes, TxBytes: l.TxBytes,
					LastRx: l.LastRx, FEC: fecString(l.K, l.R, l.Depth), Recovered: l.Recovered,
					Confirmed: l.Confirmed, PrevKeys: l.PrevKeys, Moves: l.Moves, Padded: l.Padded,
					PeerReads: shard.FeatureNames(l.PeerFeatures),
					RTTms:     ms(l.RTT), RTTLeastMs: ms(l.RTTLo), QueueLimitMs: ms(l.QueueLimit),
				}
				if l.SplitClearExp+l.SplitQueuedExp > 0 {
					ls.Split = &LossSplit{ClearExpected: l.SplitClearExp, ClearLost: l.SplitClearLost,
						QueuedExpected: l.SplitQueuedExp, QueuedLost: l.SplitQueuedLost}
				}
				if l.LossOK {
					pct := 100 * l.Loss
					ls.FECLossPct = &pct
					b := l.Burst
					ls.FECBurst, ls.FECBurstMeasured = &b, l.BurstOK
				}
				if l.RTT > 0 {
					ls.Path = l.Path.String()
				}
				ps.Lanes = append(ps.Lanes, ls)
				ps.EndpointMoves += l.Moves
				ps.RxBytes += l.RxBytes
				ps.TxBytes += l.TxBytes
				ps.RxPackets += l.RxPackets
				ps.TxPackets += l.TxPackets
				ps.FECRecovered += l.Recovered
				ps.FECLost += l.Unrecov
			}
		}
		slices.SortFunc(ps.Lanes, func(a, b LaneStatus) int { return a.Index - b.Index })
		st.Peers = append(st.Peers, ps)
	}
	slices.SortFunc(st.Peers, func(a, b PeerStatus) int {
		if a.PublicKey < b.PublicKey {
			return -1
		}
		return 1
	})
	return st
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fecString is the lane's K:R, and its interleaving depth when above 1
// ("64:24 x4": each block spreads 4 groups over the wire).
func fecString(k, r, depth int) string {
	if r == 0 {
		return "off"
	}
	s := strconv.Itoa(k) + ":" + strconv.Itoa(r)
	if depth > 1 {
		s += " x" + strconv.Itoa(depth)
	}
	return s
}

// addrString is a's text, or "" for the zero Addr.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// PeerEchoes reports whether l's peer said it reads all of what the
// delay echo needs (shard.EchoFeatures), and known whether l says what
// its peer reads at all (a daemon older than PeerReads does not).
func (l LaneStatus) PeerEchoes() (echo, known bool) {
	if l.PeerReads == nil {
		return false, false
	}
	for _, f := range shard.FeatureNames(shard.EchoFeatures) {
		if !slices.Contains(l.PeerReads, f) {
			return false, true
		}
	}
	return true, true
}
