package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/lab"
)

// The flood rows (-floods): one TCP flow A→B unflooded (flood-none), then
// for each flood the same flow twice in the same topology: while
// internal/flood's attacker sends the flood to flood.ClosedPort in B's
// namespace (the CPU-matched baseline: the same generator, rate and
// packets, so the attacker's and the kernel's CPU are the same), then
// while it sends it to B's listen port (flood-KIND). The attacker is the
// campaign's (internal/flood, as tests/e2e's campaign uses it): one goroutine, flat out, from a
// namespace of its own with a veth into B's.
const (
	floodNone    = "none"
	floodGarbage = "garbage" // (a) random datagrams from the attacker's address
	floodInit    = "init"    // (b) handshake initiations, valid mac1, spoofed sources
	floodReplay  = "replay"  // (c) the sender's tunnel datagrams, captured and resent
)

// floodKinds are the floods in the order they run.
var floodKinds = []string{floodGarbage, floodInit, floodReplay}

const (
	// floodLead is how long the attacker sends before the flow starts
	// (the flow's own -O warm-up follows).
	floodLead = 500 * time.Millisecond
	// replayCapture is how many of the sender's tunnel datagrams the
	// replay flood resends; replayFlow is the flow they are captured
	// from (not measured), replayMin the fewest that make a flood.
	replayCapture = 2000
	replayFlow    = 2 * time.Second
	replayMin     = 100
)

// parseFloods reads the -floods flag: kinds separated by commas, or "all".
func parseFloods(s string) ([]string, error) {
	var kinds []string
	for _, k := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		switch {
		case k == "all":
			return slices.Clone(floodKinds), nil
		case !slices.Contains(floodKinds, k):
			return nil, fmt.Errorf("flood %q: want %s or all", k, strings.Join(floodKinds, ", "))
		case !slices.Contains(kinds, k):
			kinds = append(kinds, k)
		}
	}
	slices.SortFunc(kinds, func(a, b string) int { return slices.Index(floodKinds, a) - slices.Index(floodKinds, b) })
	return kinds, nil
}

// floodSpecs are the flood rows' tests: the unflooded flow first, then one
// per flood (none without -floods). The flow is iperf3's one TCP flow
// under the first of -cc.
func floodSpecs(c *config) []testSpec {
	if len(c.Floods) == 0 || len(c.CCs) == 0 {
		return nil
	}
	args := []string{"-P", "1", "-C", c.CCs[0]}
	ts := []testSpec{{name: "flood-" + floodNone, args: args, flood: floodNone}}
	for _, k := range c.Floods {
		ts = append(ts, testSpec{name: "flood-" + k, args: args, flood: k})
	}
	return ts
}

// attacked reports whether the spec's flow runs under a flood.
func (s testSpec) attacked() bool { return s.flood != "" && s.flood != floodNone }

// floodRig is the attacker next to one topology's receiving side, and the
// packets of each flood, built on first use.
type floodRig struct {
	at   *flood.Attacker
	cpus []int // the sending goroutine's CPUs (the placement's); nil: any
	pkts map[string][][]byte
}

// newFloodRig attaches an attacker to t's side B.
func newFloodRig(t topology, p placement) (*floodRig, error) {
	var idb [3]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	at, err := flood.Attach(flood.Options{NS: "ycmpX-" + id, Target: t.NS(lab.B), VethTarget: "yxb" + id, VethSelf: "yxa" + id,
		Receiver: netip.AddrPortFrom(t.Underlay(lab.B), lab.Port)})
	if err != nil {
		return nil, err
	}
	return &floodRig{at: at, cpus: p.attacker, pkts: map[string][][]byte{}}, nil
}

func (r *floodRig) Close() { r.at.Close() }

// packets are the datagrams of flood kind for topology t: garbage and
// initiations are built, the replay's captured on B's link while a flow
// of spec's runs for replayFlow.
func (r *floodRig) packets(ctx context.Context, c *config, t topology, p placement, spec testSpec) ([][]byte, error) {
	if pk, ok := r.pkts[spec.flood]; ok {
		return pk, nil
	}
	var pk [][]byte
	switch spec.flood {
	case floodGarbage:
		pk = flood.Garbage(r.at.Self(), r.at.Target())
	case floodInit:
		inits, err := t.Initiations(flood.SpoofedSources)
		if err != nil {
			return nil, err
		}
		pk = flood.Spoofed(inits, r.at.Target())
	case floodReplay:
		capt, err := flood.StartCapture(flood.CaptureOptions{NS: t.NS(lab.B), Ifname: t.Veth(lab.B), Src: t.Underlay(lab.A), Port: lab.Port,
			N: replayCapture, Timeout: replayFlow + 10*time.Second, SplitGSO: true})
		if err != nil {
			return nil, err
		}
		short := *c
		short.Duration, short.Omit = replayFlow, 0
		var scratch Record
		ferr := runIperf(ctx, &short, t, p, spec, &scratch)
		capt.Stop()
		pk = capt.Wait()
		if ferr != nil {
			return nil, fmt.Errorf("the flow to capture from: %w", ferr)
		}
		if len(pk) < replayMin {
			return nil, fmt.Errorf("captured only %d of the sender's datagrams", len(pk))
		}
		pk = flood.Replay(pk)
	default:
		return nil, fmt.Errorf("no flood %q", spec.flood)
	}
	r.pkts[spec.flood] = pk
	return pk, nil
}

// floodSettle is the pause between a flooded flow and its CPU-matched
// baseline: longer than the receiver's load window for cookies.
const floodSettle = 2 * time.Second

// floodRun is what the attacker sent while a flow ran.
type floodRun struct {
	sent uint64
	pps  float64
}

// during runs f while the attacker sends pkts to port, flat out (pps ≤ 0)
// or at pps: it starts floodLead before f and stops when f returns.
func (r *floodRig) during(ctx context.Context, port uint16, pkts [][]byte, pps float64, f func() error) (floodRun, error) {
	r.at.SetPort(port)
	var stop atomic.Bool
	sent := make(chan uint64, 1)
	start := time.Now()
	go func() {
		if len(r.cpus) > 0 {
			// This thread only: it ends with the goroutine (locked,
			// never unlocked), so no other goroutine inherits the mask.
			runtime.LockOSThread()
			var set unix.CPUSet
			for _, c := range r.cpus {
				set.Set(c)
			}
			_ = unix.SchedSetaffinity(0, &set)
		}
		sent <- r.at.Send(&stop, pkts, pps)
	}()
	var err error
	if sleepCtx(ctx, floodLead) {
		err = f()
	} else {
		err = ctx.Err()
	}
	stop.Store(true)
	n := <-sent
	fr := floodRun{sent: n, pps: float64(n) / time.Since(start).Seconds()}
	if err == nil && n == 0 {
		err = errors.New("the attacker sent nothing")
	}
	return fr, err
}

// matchedBaseline is a flood row's CPU-matched baseline: spec's flow
// while the attacker sends the flood's packets to flood.ClosedPort at the
// rate it reached against the receiver (r.FloodPPS: a receiver that takes
// CPU from the attacker slows it, and a baseline sent flat out would then
// cost the machine more than the flood did), into r.
func matchedBaseline(ctx context.Context, c *config, t topology, p placement, spec testSpec, rig *floodRig, pkts [][]byte, r *Record) error {
	var m Record
	fr, err := rig.during(ctx, flood.ClosedPort, pkts, r.FloodPPS, func() error { return runIperf(ctx, c, t, p, spec, &m) })
	if err != nil {
		return fmt.Errorf("CPU-matched baseline: %w", err)
	}
	r.MatchedGbps, r.MatchedSent, r.MatchedPPS = m.RecvGbps, fr.sent, fr.pps
	return nil
}

// floodHeader says in the table's header how the flood rows were made.
func floodHeader(c *config) string {
	cc := ""
	if len(c.CCs) > 0 {
		cc = c.CCs[0]
	}
	desc := map[string]string{
		floodGarbage: fmt.Sprintf("garbage (%d random datagrams of 1–%d bytes from random ports of the attacker's address)", flood.GarbageCount, flood.GarbageMax),
		floodInit: fmt.Sprintf("init (%d handshake initiations with a valid mac1 for the receiver's key, each from its own spoofed source in %s: yip-router's from crypto.Initiate, WireGuard's type-1 messages for wireguard-go)",
			flood.SpoofedSources, flood.SpoofNet),
		floodReplay: fmt.Sprintf("replay (up to %d of the sender's tunnel datagrams, captured on the receiver's link during a %s flow, resent byte for byte)", replayCapture, replayFlow),
	}
	var fl []string
	for _, k := range c.Floods {
		fl = append(fl, desc[k])
	}
	return fmt.Sprintf("Flood rows: one TCP flow (iperf3 -P 1 -C %s) unflooded, then per flood the same flow while internal/flood's attacker "+
		"(its own namespace with a veth into the receiver's; one goroutine sending flat out through a raw socket; in the pinned placement on CPU 1, with the sender and the tools) "+
		"sends the flood to the receiver's listen port flat out, then, at the rate it reached there, to UDP port %d in the receiver's namespace, where nobody listens (the CPU-matched baseline); "+
		"the attacker starts %s before each flow. Floods: %s.\n", cc, flood.ClosedPort, floodLead, strings.Join(fl, "; "))
}
