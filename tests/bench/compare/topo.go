package main

import (
	"fmt"
	"net/netip"
	"os/exec"
	"sync"
	"time"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/router"
)

// topology is one implementation running in the two-namespace veth setup:
// side lab.A sends (iperf3 client, ping), side lab.B receives (iperf3
// server). Both implementations get the same addresses and inner MTU.
type topology interface {
	NS(s lab.Side) string
	Tun(s lab.Side) string // the tunnel device
	Pid(s lab.Side) int    // the daemon serving that side
	Inner(s lab.Side) netip.Addr
	Underlay(s lab.Side) netip.Addr // the side's address on the link between them
	Veth(s lab.Side) string         // the side's end of that link
	// Initiations are n handshake initiations to side B from a static
	// key B does not know, each with a valid mac1 for B's key and each
	// its own (the flood rows' spoofed-initiation flood).
	Initiations(n int) ([][]byte, error)
	// Bridge is the impairment bridge's counters per direction ([0]: A
	// to B); false without one.
	Bridge() ([2]impair.Stats, bool)
	// FEC is yip-router's FEC counters (A's sending side, B's receiving
	// side); false for an implementation without FEC.
	FEC() (fecStats, bool)
	// PathState is what the sending side (A) judges of the path's queue
	// on its busiest lane (clear, queued, drained, unknown: the FEC
	// adapter's input, fec.PathState); false for an implementation
	// without one, or when the status cannot be read.
	PathState() (pathSample, bool)
	Close()
}

// yipTopo is yip-router in internal/lab's setup (MTU config.DefaultMTU).
type yipTopo struct {
	l *lab.Lab
	// sent is what each of A's lanes had sent at the last PathState
	// (busiestLane), guarded by mu.
	mu   sync.Mutex
	sent map[laneKey]uint64
}

// laneKey names a lane in A's status: its peer's key and its index.
type laneKey struct {
	peer  string
	index int
}

// newYip starts yip-router on both sides; extra goes into both configs'
// [Interface]; cpus are taskset lists per side ("" = unpinned); wan, when
// not nil, puts the impairment bridge between the sides
// (lab.Options.Impair).
func newYip(bin, fec, extra string, cpus [2]string, wan *impair.Config) (topology, error) {
	l, err := lab.New(lab.Options{Bin: bin, FEC: [2]string{fec, fec}, Extra: [2]string{extra, extra}, CPUs: cpus, Impair: wan})
	if err != nil {
		return nil, err
	}
	for _, s := range []lab.Side{lab.B, lab.A} {
		if err := l.Start(s); err != nil {
			l.Close()
			return nil, err
		}
	}
	t := &yipTopo{l: l}
	if err := waitTunnel(t, 15*time.Second); err != nil {
		l.Close()
		return nil, err
	}
	return t, nil
}

func (t *yipTopo) NS(s lab.Side) string           { return t.l.NS[s] }
func (t *yipTopo) Tun(s lab.Side) string          { return t.l.Ifname[s] }
func (t *yipTopo) Pid(s lab.Side) int             { return t.l.Pid(s) }
func (t *yipTopo) Inner(s lab.Side) netip.Addr    { return t.l.Inner4[s] }
func (t *yipTopo) Underlay(s lab.Side) netip.Addr { return t.l.Underlay[s] }
func (t *yipTopo) Veth(s lab.Side) string         { return t.l.Veth(s) }
func (t *yipTopo) Close()                         { t.l.Close() }
func (t *yipTopo) Bridge() ([2]impair.Stats, bool) {
	return t.l.ImpairStats(), t.l.ImpairNS != ""
}

// Initiations are yip-router's, as the flood campaign sends them
// (flood.YipInitiations).
func (t *yipTopo) Initiations(n int) ([][]byte, error) {
	return flood.YipInitiations(t.l.PublicKey(lab.B), n)
}

func (t *yipTopo) FEC() (fecStats, bool) {
	a, errA := t.l.Status(lab.A)
	b, errB := t.l.Status(lab.B)
	if errA != nil || errB != nil {
		return fecStats{}, false
	}
	var f fecStats
	for _, sh := range a.Shards {
		f.ParityOut += sh.Counters["parity_out"]
		f.UDPOut += sh.Counters["udp_out"]
	}
	for _, sh := range b.Shards {
		f.ParityBack += sh.Counters["parity_out"]
		f.UDPBack += sh.Counters["udp_out"]
	}
	rx := receiverFEC(b)
	f.Recovered, f.Unrecovered = rx.recovered, rx.lost
	return f, true
}

func (t *yipTopo) PathState() (pathSample, bool) {
	st, err := t.l.Status(lab.A)
	if err != nil {
		return pathSample{}, false
	}
	busiest := t.busiestLane(st)
	if busiest == nil {
		return pathSample{}, false
	}
	loss := "-"
	if busiest.FECLossPct != nil {
		loss = fmt.Sprintf("%.2f%%", *busiest.FECLossPct)
	}
	split := "-"
	if c := busiest.Split; c != nil {
		split = fmt.Sprintf("%d/%d clear %d/%d queued", c.ClearLost, c.ClearExpected, c.QueuedLost, c.QueuedExpected)
	}
	s := pathSample{State: busiest.Path, Detail: fmt.Sprintf("rtt %.1f least %.1f fec %s loss %s split %s",
		busiest.RTTms, busiest.RTTLeastMs, busiest.FEC, loss, split)}
	rx, err := t.l.Status(lab.B)
	if err == nil {
		s.Detail += " " + rxFEC(rx)
	}
	if s.State == "" || s.State == "unknown" {
		s.State = unknownPath(busiest, peerLane(rx, st, busiest.Index))
	}
	return s, true
}

// unknownPath names why the sender's lane tx has no path state: it, or
// the receiver's lane rx of the same index (nil: not found), has not
// heard the other side say it reads the delay echo (a hello lost), so
// no round trip is measured; else no sample yet, or none recent, or a
// router too old to say what its peer reads.
func unknownPath(tx, rx *router.LaneStatus) string {
	if echo, known := tx.PeerEchoes(); known && !echo {
		return "unknown-tx-no-echo"
	}
	if rx != nil {
		if echo, known := rx.PeerEchoes(); known && !echo {
			return "unknown-rx-no-echo"
		}
	}
	return "unknown"
}

// peerLane is rx's lane of index i to the router whose status is tx
// (nil: none).
func peerLane(rx, tx *router.Status, i int) *router.LaneStatus {
	if rx == nil || tx == nil {
		return nil
	}
	for p := range rx.Peers {
		if rx.Peers[p].PublicKey != tx.PublicKey {
			continue
		}
		for j := range rx.Peers[p].Lanes {
			if l := &rx.Peers[p].Lanes[j]; l.Index == i {
				return l
			}
		}
	}
	return nil
}

// rxFECCounts is what a receiving router's decoders did so far (counters
// since start): data symbols recovered, lost for good, groups given up at
// the byte cap and symbols not kept at it.
type rxFECCounts struct{ recovered, lost, evicted, notStored uint64 }

// receiverFEC sums st's shards' and peers' FEC counters.
func receiverFEC(st *router.Status) rxFECCounts {
	var c rxFECCounts
	for _, sh := range st.Shards {
		c.recovered += sh.Counters["fec_recovered"]
		c.evicted += sh.Counters["fec_evicted"]
		c.notStored += sh.Counters["fec_not_stored"]
	}
	for _, p := range st.Peers {
		c.lost += p.FECLost
	}
	return c
}

// rxFEC is receiverFEC for a -series file's detail: where the counts rise
// shows when a group failed.
func rxFEC(st *router.Status) string {
	c := receiverFEC(st)
	return fmt.Sprintf("rx recovered %d lost %d evicted %d not_stored %d", c.recovered, c.lost, c.evicted, c.notStored)
}

// busiestLane is the lane of A's that sent the most since the last call:
// the routers carry one test after another, and the lane of a test
// before (which sent the most in all) is not the one the flow now takes.
// The first call only notes what each lane sent (nil), and so does one
// when no lane sent anything since.
func (t *yipTopo) busiestLane(st *router.Status) *router.LaneStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	first := t.sent == nil
	prev := t.sent
	t.sent = map[laneKey]uint64{}
	var busiest *router.LaneStatus
	var most uint64
	for i := range st.Peers {
		for j := range st.Peers[i].Lanes {
			l := &st.Peers[i].Lanes[j]
			k := laneKey{st.Peers[i].PublicKey, l.Index}
			t.sent[k] = l.TxPackets
			if d := l.TxPackets - min(prev[k], l.TxPackets); !first && d > most {
				busiest, most = l, d
			}
		}
	}
	return busiest // nil when none sent anything since
}

// pathSample is one reading of the sender's busiest lane: its path state,
// and for a -series file what its FEC adapter stood at (round trip and
// least in ms, ratio, the loss it acted on).
type pathSample struct{ State, Detail string }

// waitTunnel pings from A to B's inner address until a reply comes back
// (the first packet starts the handshake).
func waitTunnel(t topology, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		err := exec.Command("ip", "netns", "exec", t.NS(lab.A), "ping", "-n", "-c", "1", "-W", "1", t.Inner(lab.B).String()).Run()
		if err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no ping reply through the tunnel from %s to %s within %s", t.NS(lab.A), t.Inner(lab.B), timeout)
}
