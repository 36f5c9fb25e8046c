package main

// Script-friendly show output: `show --dump` (versioned, tab-separated,
// fixed columns; docs/SHOW.md) and the one-field subviews in the spirit of
// `wg show`. Keep docs/SHOW.md in step with every column here.

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/router"
)

// dumpVersion is the number in the dump's first line. Within a version,
// columns are only ever appended at the end of a line; removing, reordering
// or changing the meaning of a column bumps it.
const dumpVersion = 1

// The column counts of version 1's lines (tests hold the formatters to them).
const (
	dumpInterfaceColumns = 20
	dumpPeerColumns      = 15
)

// none stands for an empty field (no endpoint, no allowed IPs, no offload
// on), as in `wg show`.
const none = "(none)"

// offloadNames is the order offloads are listed in.
var offloadNames = []string{"tso", "uso", "gro", "udp-gso", "udp-gro"}

// views are the subviews of show, each one line per peer.
var views = []string{"peers", "endpoints", "transfer", "latest-handshakes", "allowed-ips", "dump"}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// offloadsOn lists the offloads that are on, comma-joined in a fixed order.
func offloadsOn(st *router.Status) string {
	var on []string
	for _, name := range offloadNames {
		if st.Offloads[name] == "on" {
			on = append(on, name)
		}
	}
	// Offloads this build does not know yet, after the known ones.
	var other []string
	for name, v := range st.Offloads {
		if v == "on" && !slices.Contains(offloadNames, name) {
			other = append(other, name)
		}
	}
	slices.Sort(other)
	return orNone(strings.Join(append(on, other...), ","))
}

// shardDrops sums every shard's drop_ counters.
func shardDrops(st *router.Status) uint64 {
	var n uint64
	for _, s := range st.Shards {
		for k, v := range s.Counters {
			if strings.HasPrefix(k, "drop_") {
				n += v
			}
		}
	}
	return n
}

func latestHandshake(p router.PeerStatus) string {
	if p.LastHandshake.IsZero() {
		return "0"
	}
	return strconv.FormatInt(p.LastHandshake.Unix(), 10)
}

func keepalive(p router.PeerStatus) string {
	if p.PersistentKeepalive <= 0 {
		return "off"
	}
	return strconv.FormatInt(int64(p.PersistentKeepalive.Seconds()), 10)
}

// interfaceFields are the columns of an interface line (docs/SHOW.md).
func interfaceFields(st *router.Status) []string {
	h, k := st.Handshakes, st.Kernel
	return []string{
		"interface", st.Interface, st.PublicKey, strconv.Itoa(int(st.ListenPort)),
		strconv.Itoa(len(st.Shards)), strconv.FormatInt(int64(st.Uptime.Seconds()), 10), offloadsOn(st),
		u(h.Initiated), u(h.Completed), u(h.Answered), u(h.CookieDemanded), u(h.Refused), u(h.RateLimited),
		u(shardDrops(st)), u(k.TUNTxDropped), u(k.TUNRxDropped), u(k.SocketDrops),
		u(h.CookieCapped), u(k.StrangerDrops), u(k.KnownDrops),
	}
}

// peerFields are the columns of a peer line (docs/SHOW.md).
func peerFields(st *router.Status, p router.PeerStatus) []string {
	return []string{
		"peer", st.Interface, p.PublicKey, orNone(p.Endpoint), orNone(strings.Join(p.AllowedIPs, ",")),
		latestHandshake(p), u(p.RxBytes), u(p.TxBytes), u(p.RxPackets), u(p.TxPackets),
		strconv.Itoa(len(p.Lanes)), u(p.FECRecovered), u(p.FECLost), u(p.Handshakes), keepalive(p),
	}
}

// writeDump prints the versioned dump of every router in all.
func writeDump(w io.Writer, all []*router.Status) {
	fmt.Fprintf(w, "yip-router-dump\t%d\n", dumpVersion)
	for _, st := range all {
		fmt.Fprintln(w, strings.Join(interfaceFields(st), "\t"))
		for _, p := range st.Peers {
			fmt.Fprintln(w, strings.Join(peerFields(st, p), "\t"))
		}
	}
}

// writeView prints one subview: one line per peer, tab-separated, led by
// the interface name when prefix is set (show without -i: every router).
func writeView(w io.Writer, view string, all []*router.Status, prefix bool) {
	for _, st := range all {
		for _, p := range st.Peers {
			var f []string
			if prefix {
				f = append(f, st.Interface)
			}
			f = append(f, p.PublicKey)
			switch view {
			case "endpoints":
				f = append(f, orNone(p.Endpoint))
			case "transfer":
				f = append(f, u(p.RxBytes), u(p.TxBytes))
			case "latest-handshakes":
				f = append(f, latestHandshake(p))
			case "allowed-ips":
				f = append(f, orNone(strings.Join(p.AllowedIPs, " ")))
			}
			fmt.Fprintln(w, strings.Join(f, "\t"))
		}
	}
}
