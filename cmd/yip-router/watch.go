package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/router"
)

// queryStatus is router.QueryStatus (a fake in tests).
var queryStatus = router.QueryStatus

// shardRate is one shard's traffic between two status snapshots, per
// second.
type shardRate struct {
	ID, CPU                  int
	PktIn, PktOut            float64 // underlay datagrams/s
	BitsIn, BitsOut          float64 // underlay payload bits/s
	TunIn, TunOut            float64 // inner packets/s
	Drops, Recovered, Handed float64
}

// laneRate is one lane's traffic between two snapshots, per second.
type laneRate struct {
	Peer            string
	Index, Shard    int
	Remote, FEC     string
	PktIn, PktOut   float64
	BitsIn, BitsOut float64
}

// delta is cur-prev for a counter, or cur when the counter went back
// (router restarted, new session).
func delta(prev, cur uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// interval is the time between two snapshots: the routers' own uptimes
// when they advance (the time the router measured between the two
// answers), else wall.
func interval(prev, cur *router.Status, wall time.Duration) time.Duration {
	if d := cur.Uptime - prev.Uptime; d > 0 {
		return d
	}
	return wall
}

// rates computes per-shard and per-lane rates from two snapshots of one
// router taken dt apart.
func rates(prev, cur *router.Status, dt time.Duration) ([]shardRate, []laneRate) {
	sec := dt.Seconds()
	if sec <= 0 {
		sec = 1
	}
	per := func(p, c uint64) float64 { return float64(delta(p, c)) / sec }
	var out []shardRate
	for _, s := range cur.Shards {
		var pc map[string]uint64
		for _, ps := range prev.Shards {
			if ps.ID == s.ID {
				pc = ps.Counters
			}
		}
		c := s.Counters
		r := shardRate{
			ID: s.ID, CPU: s.CPU,
			PktIn: per(pc["udp_in"], c["udp_in"]), PktOut: per(pc["udp_out"], c["udp_out"]),
			BitsIn: 8 * per(pc["bytes_in"], c["bytes_in"]), BitsOut: 8 * per(pc["bytes_out"], c["bytes_out"]),
			TunIn: per(pc["tun_in"], c["tun_in"]), TunOut: per(pc["tun_out"], c["tun_out"]),
			Recovered: per(pc["fec_recovered"], c["fec_recovered"]), Handed: per(pc["handed_off"], c["handed_off"]),
		}
		for k, v := range c {
			if strings.HasPrefix(k, "drop_") {
				r.Drops += per(pc[k], v)
			}
		}
		out = append(out, r)
	}
	prevLanes := map[string]router.LaneStatus{}
	for _, p := range prev.Peers {
		for _, l := range p.Lanes {
			prevLanes[fmt.Sprintf("%s/%d", p.PublicKey, l.Index)] = l
		}
	}
	var lanes []laneRate
	for _, p := range cur.Peers {
		for _, l := range p.Lanes {
			pl := prevLanes[fmt.Sprintf("%s/%d", p.PublicKey, l.Index)]
			lanes = append(lanes, laneRate{
				Peer: p.PublicKey, Index: l.Index, Shard: l.Shard, Remote: l.Remote, FEC: l.FEC,
				PktIn: per(pl.RxPackets, l.RxPackets), PktOut: per(pl.TxPackets, l.TxPackets),
				BitsIn: 8 * per(pl.RxBytes, l.RxBytes), BitsOut: 8 * per(pl.TxBytes, l.TxBytes),
			})
		}
	}
	return out, lanes
}

// si formats a rate with an SI prefix: 950, 12.3k, 4.56M, 1.20G.
func si(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f G%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2f M%s", v/1e6, unit)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k%s", v/1e3, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func shortKey(k string) string {
	if len(k) > 8 {
		return k[:8] + "…"
	}
	return k
}

// printRates writes one router's screen.
func printRates(w io.Writer, st *router.Status, shards []shardRate, lanes []laneRate, dt time.Duration) {
	h := st.Handshakes
	fmt.Fprintf(w, "%s  up %s  %d shards  handshakes %d/%d/%d (initiated/completed/answered), %d refused\n",
		st.Interface, st.Uptime.Round(time.Second), len(st.Shards), h.Initiated, h.Completed, h.Answered, h.Refused)
	fmt.Fprintf(w, "  %-9s %-5s %12s %14s %12s %14s %12s %12s %10s\n", "SHARD", "CPU", "UDP IN", "IN BITS", "UDP OUT", "OUT BITS", "TUN IN", "TUN OUT", "DROPS")
	var tot shardRate
	for _, r := range shards {
		fmt.Fprintf(w, "  shard %-3d %-5d %12s %14s %12s %14s %12s %12s %10s\n", r.ID, r.CPU,
			si(r.PktIn, "pkt/s"), si(r.BitsIn, "bit/s"), si(r.PktOut, "pkt/s"), si(r.BitsOut, "bit/s"),
			si(r.TunIn, "pkt/s"), si(r.TunOut, "pkt/s"), si(r.Drops, "/s"))
		tot.PktIn += r.PktIn
		tot.PktOut += r.PktOut
		tot.BitsIn += r.BitsIn
		tot.BitsOut += r.BitsOut
		tot.TunIn += r.TunIn
		tot.TunOut += r.TunOut
		tot.Drops += r.Drops
	}
	if len(shards) > 1 {
		fmt.Fprintf(w, "  %-9s %-5s %12s %14s %12s %14s %12s %12s %10s\n", "total", "",
			si(tot.PktIn, "pkt/s"), si(tot.BitsIn, "bit/s"), si(tot.PktOut, "pkt/s"), si(tot.BitsOut, "bit/s"),
			si(tot.TunIn, "pkt/s"), si(tot.TunOut, "pkt/s"), si(tot.Drops, "/s"))
	}
	for _, l := range lanes {
		fmt.Fprintf(w, "  lane %d shard %d peer %s → %s  rx %s %s  tx %s %s  fec %s\n", l.Index, l.Shard, shortKey(l.Peer), l.Remote,
			si(l.PktIn, "pkt/s"), si(l.BitsIn, "bit/s"), si(l.PktOut, "pkt/s"), si(l.BitsOut, "bit/s"), l.FEC)
	}
	fmt.Fprintln(w)
}

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// watch shows per-shard and per-lane rates of the routers behind paths,
// refreshed every interval, like top: until SIGINT/SIGTERM, or count
// refreshes when count > 0. Each refresh compares a snapshot with the one
// before it; the first comes one interval after start. With redraw (stdout
// is a terminal) each refresh clears the screen first; without, refreshes
// follow one another as plain text, for a pipe or a log file.
func watch(stdout io.Writer, paths []string, every time.Duration, count int, redraw bool) int {
	if every <= 0 {
		every = time.Second
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	prev := map[string]*router.Status{}
	prevAt := time.Now()
	snap := func() map[string]error {
		errs := map[string]error{}
		for _, p := range paths {
			st, err := queryStatus(p)
			if err != nil {
				errs[p] = err
				delete(prev, p)
				continue
			}
			prev[p] = st
		}
		return errs
	}
	snap()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; count <= 0 || n < count; n++ {
		select {
		case <-sigs:
			return 0
		case <-tick.C:
		}
		old := make(map[string]*router.Status, len(prev))
		for k, v := range prev {
			old[k] = v
		}
		wall := time.Since(prevAt)
		prevAt = time.Now()
		errs := snap()
		if redraw {
			fmt.Fprint(stdout, clearScreen)
		}
		fmt.Fprintf(stdout, "yip-router show --watch: every %s, %s (Ctrl-C to quit)\n\n", every, time.Now().Format("15:04:05"))
		for _, p := range paths {
			if err := errs[p]; err != nil {
				fmt.Fprintf(stdout, "%s: %v\n\n", p, err)
				continue
			}
			cur, before := prev[p], old[p]
			if before == nil {
				fmt.Fprintf(stdout, "%s: (first snapshot; rates from the next refresh)\n\n", cur.Interface)
				continue
			}
			dt := interval(before, cur, wall)
			sh, ln := rates(before, cur, dt)
			printRates(stdout, cur, sh, ln, dt)
		}
	}
	return 0
}
