package shard

// The FEC adapter's life on a lane (a rekey keeps what it learned; the
// round trip comes from the handshake, a responder's from the initiator's
// keepalives), the hello exchange that carries features and round trip,
// and the lengths of control frames.

import (
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// installAuto gives a and b one lane of fresh keys in FEC auto mode, b
// holding its old keys (a rekey's responder) when it has some; a's lane
// knows the handshake's round trip rtt.
func installAuto(t *testing.T, a, b *side, rtt time.Duration) {
	t.Helper()
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
	auto := fec.Mode{Kind: fec.ModeAuto}
	if err := a.shards[0].InstallLane(LaneConfig{Peer: 2, Index: 0, Lanes: 1, Remote: addrB,
		Send: ka.SendLane(0), Recv: ka.RecvLane(0), FEC: fec.EncoderConfig{K: 16, R: 2}, Mode: auto, RTT: rtt}); err != nil {
		t.Fatal(err)
	}
	if err := b.shards[0].InstallLane(LaneConfig{Peer: 1, Index: 0, Lanes: 1, Remote: addrA,
		Send: kb.SendLane(0), Recv: kb.RecvLane(0), FEC: fec.EncoderConfig{K: 16, R: 2}, Mode: auto, HoldTx: true}); err != nil {
		t.Fatal(err)
	}
}

func TestAdapterRTTAndRekey(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa, sb := a.shards[0], b.shards[0]
	installAuto(t, a, b, 50*time.Millisecond)
	la, lb := sa.table.lanes[addrB], sb.table.lanes[addrA]
	if got, want := la.adapt.Target(), fec.TCPResidual(50*time.Millisecond); got != want {
		t.Fatalf("initiator's target %g, want TCPResidual(50 ms) = %g", got, want)
	}
	if got := lb.adapt.Target(); got != fec.DefaultAdaptConfig.Target {
		t.Fatalf("responder's target before any keepalive %g", got)
	}
	// A's keepalive (as when the handshake completes) tells B the round
	// trip and A's features; B's first keepalive after that tells A its.
	if !sa.SendKeepalive(2, 0) {
		t.Fatal("no keepalive sent")
	}
	deliverAll(t, a, b, nil)
	if got, want := lb.adapt.Target(), fec.TCPResidual(50*time.Millisecond); got != want || lb.rtt != 50*time.Millisecond {
		t.Fatalf("responder's target %g (rtt %s) after A's keepalive, want %g", got, lb.rtt, want)
	}
	if lb.peerFeatures != Features || !lb.helloDue {
		t.Fatalf("responder learnt features %#x, hello due %v", lb.peerFeatures, lb.helloDue)
	}
	sb.tick()
	deliverAll(t, b, a, nil)
	if la.peerFeatures != Features || lb.helloDue || !la.acked {
		t.Fatalf("initiator learnt features %#x (acked %v); responder's hello still due %v", la.peerFeatures, la.acked, lb.helloDue)
	}
	if la.adapt.Target() != fec.TCPResidual(50*time.Millisecond) {
		t.Fatal("the responder's keepalive changed the initiator's own round trip")
	}

	// 5% loss reported: the ratio rises; a rekey keeps it (and the
	// adapter), where a fresh adapter would start over at 16:2.
	k, r := lb.adapt.Observe(fec.LossReport{Expected: 10000, Received: 9500})
	_ = lb.cur.enc.SetRatio(k, r)
	if k == 16 && r == 2 {
		t.Fatalf("5%% loss left the ratio at the start %d:%d", k, r)
	}
	ad, enc := lb.adapt, lb.cur.enc
	installAuto(t, a, b, 80*time.Millisecond)
	nb := sb.table.lanes[addrA]
	if nb.cur.enc == enc || nb.adapt != ad {
		t.Fatal("the rekey did not keep the lane's adapter for the new keys' encoder")
	}
	// Within what an older peer reads until the new keys' hello says
	// it reads long groups; then what the adapter learned.
	if nk, nr := nb.cur.enc.Ratio(); nk > fec.LegacyMaxK || nr > fec.LegacyMaxR {
		t.Fatalf("the rekey's encoder runs %d:%d before the peer's hello", nk, nr)
	}
	sb.control(nb, []byte{ctlKeepalive, Features, 0, 50})
	if nk, nr := nb.cur.enc.Ratio(); nk != k || nr != r {
		t.Fatalf("the rekey's encoder runs %d:%d after the hello, the adapter had learned %d:%d", nk, nr, k, r)
	}
	if got, want := sa.table.lanes[addrB].adapt.Target(), fec.TCPResidual(80*time.Millisecond); got != want {
		t.Fatalf("the initiator's rekey did not take the new round trip: %g, want %g", got, want)
	}
	// Until A uses the new keys, B sends under the old ones: a ratio
	// the next report asks for reaches that encoder too.
	if nb.sendKeys() != nb.prev {
		t.Fatal("the rekey responder does not send under its old keys")
	}
	body, err := fec.LossReport{Expected: 10000, Received: 8000}.AppendBinary([]byte{ctlLossReport})
	if err != nil {
		t.Fatal(err)
	}
	sb.control(nb, body)
	sb.now = sb.now.Add(time.Second)
	sb.tick()
	wk, wr := nb.adapt.Ratio()
	if wk == k && wr == r {
		t.Fatalf("20%% loss left the ratio at %d:%d", k, r)
	}
	if gk, gr := nb.sendKeys().enc.Ratio(); gk != wk || gr != wr {
		t.Fatalf("the encoder B sends with runs %d:%d, the adapter asks %d:%d", gk, gr, wk, wr)
	}
}

// A loss report carries its runs of lost symbols only to a peer whose
// keepalives announced FeatureLossRuns, and padding only to one that
// announced FeaturePadding; an older peer gets the 12-byte report it
// parses. Keepalives are padded to the lane's recent data lengths (sent or
// received) for every peer.
func TestControlFrameLengthsByPeerFeatures(t *testing.T) {
	const over = crypto.FrameOverhead + crypto.SymbolOverhead
	dataLens := map[int]bool{}
	for _, feat := range []uint8{0, FeatureLossRuns, FeatureLossRuns | FeaturePadding} {
		a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
		connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
		sa, sb := a.shards[0], b.shards[0]
		sb.table.lanes[addrA].peerFeatures = feat
		// A's datagrams and B's own: the lengths B's control frames
		// take (those B received count as well as those it sent).
		for i := range 40 {
			// Data, and parity (2 bytes over its group's longest).
			dataLens[100+10*(i%3)+over], dataLens[100+10*(i%3)+over+2] = true, true
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100+10*(i%3), i))
		}
		for i := range 8 {
			n := 60 + 200*(i%4)
			dataLens[n+over], dataLens[n+over+2] = true, true
			inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", n, i))
		}
		// Its size classes' partial groups flush their parity first.
		sb.now = sb.now.Add(fec.DefaultFlushTimeout)
		sb.tick()
		sb.flushAll()
		b.sent[0] = nil
		deliverAll(t, a, b, func(i int) bool { return i%7 == 3 })
		// The groups expire out of the decoder's window, then B's report
		// falls due.
		for range 60 {
			sb.now = sb.now.Add(50 * time.Millisecond)
			sb.tick()
			sb.flushAll()
		}
		var lens []int
		for _, d := range b.sent[0] {
			lens = append(lens, len(d.data))
		}
		short, long := over+1+fec.LossReportLenV1, over+1+fec.LossReportLen
		for _, n := range lens {
			switch {
			case n == short && feat == 0, n == long && feat == FeatureLossRuns:
			case dataLens[n]: // padded: a keepalive, or a padded report
			default:
				t.Fatalf("features %#x: B sent a %d-byte control datagram (all %v; data %v)", feat, n, lens, dataLens)
			}
		}
		// The loss report, whatever its form (it goes out before the
		// passive keepalive would, which it makes unnecessary).
		if len(lens) != 1 {
			t.Fatalf("features %#x: B sent %d control datagrams %v, want its loss report", feat, len(lens), lens)
		}
		if feat != FeatureLossRuns|FeaturePadding && !slices.Contains(lens, map[bool]int{true: long, false: short}[feat != 0]) {
			t.Fatalf("features %#x: no loss report among %v", feat, lens)
		}
		// A reads every form, and its adapter would see the report.
		bad := sa.stats.c[DropBadHeader]
		deliverAll(t, b, a, nil)
		if sa.stats.c[DropBadHeader] != bad {
			t.Fatalf("features %#x: A refused a control frame", feat)
		}
	}
}

// A padded loss report (what a FeaturePadding peer sends) reaches the
// adapter like an unpadded one.
func TestPaddedLossReportObserved(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	installAuto(t, a, b, 0)
	la := a.shards[0].table.lanes[addrB]
	rep, _ := fec.LossReport{Expected: 10000, Received: 9000, Runs: 1000}.AppendBinary([]byte{ctlLossReport})
	k0, r0 := la.cur.enc.Ratio()
	a.shards[0].control(la, append(rep, make([]byte, 300)...))
	if k, r := la.cur.enc.Ratio(); k == k0 && r == r0 {
		t.Fatalf("a padded 10%% report left the ratio at %d:%d", k, r)
	}
}

// A lost hello is sent again about a second later, until the peer
// acknowledges it; then no more.
func TestHelloRepeatedUntilAcknowledged(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	installAuto(t, a, b, 50*time.Millisecond)
	sa, sb := a.shards[0], b.shards[0]
	la, lb := sa.table.lanes[addrB], sb.table.lanes[addrA]
	step := func(d time.Duration) {
		sa.now, sb.now = sa.now.Add(d), sb.now.Add(d)
		sa.tick()
		sb.tick()
	}
	sa.SendKeepalive(2, 0)
	sa.flushAll()
	a.sent[0] = nil // lost
	for range 26 {  // 1.3 s: the repeat comes 0.75..1.25 s later, the next 0.75 s after it
		step(50 * time.Millisecond)
	}
	sa.flushAll()
	if n := len(a.sent[0]); n != 1 || la.hellos != 2 {
		t.Fatalf("1.3 s after a lost hello A sent %d datagrams (%d hellos), want it again", n, la.hellos)
	}
	// Padded like small data: A has sent no data yet.
	const over = crypto.FrameOverhead + crypto.SymbolOverhead
	if n := len(a.sent[0][0].data); n < over+padMinDefault || n > over+padMaxDefault {
		t.Fatalf("hello of %d bytes, want %d..%d", n, over+padMinDefault, over+padMaxDefault)
	}
	deliverAll(t, a, b, nil)
	if lb.peerFeatures != Features || lb.rtt != 50*time.Millisecond {
		t.Fatalf("B learnt features %#x, rtt %s", lb.peerFeatures, lb.rtt)
	}
	step(50 * time.Millisecond)
	deliverAll(t, b, a, nil)
	if !la.acked || la.peerFeatures != Features {
		t.Fatalf("A: acked %v, features %#x", la.acked, la.peerFeatures)
	}
	hellos := la.hellos
	for range 100 {
		step(50 * time.Millisecond)
		deliverAll(t, b, a, nil)
		deliverAll(t, a, b, nil)
	}
	if la.hellos != hellos || lb.hellos > 1 {
		t.Fatalf("hellos after the acknowledgement: A %d → %d, B %d", hellos, la.hellos, lb.hellos)
	}
	// An older router's 1-byte keepalive: it reads no features.
	la.peerFeatures = Features
	sa.control(la, []byte{ctlKeepalive})
	if la.peerFeatures != 0 {
		t.Fatal("a 1-byte keepalive left the features")
	}
}

// A loss report reaching the lane gives its encoder the adapter's parity
// table for groups that close early: a lone packet, flushed, carries the
// table's parity count for one data symbol, not the full R.
func TestLossReportSetsPartialParity(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa := a.shards[0]
	installAuto(t, a, b, 50*time.Millisecond)
	la := sa.table.lanes[addrB]
	body, err := fec.LossReport{Expected: 10000, Received: 9500, Runs: 500}.AppendBinary([]byte{ctlLossReport})
	if err != nil {
		t.Fatal(err)
	}
	var k, r int
	for range 4 {
		sa.control(la, body)
		k, r = la.cur.enc.Ratio()
	}
	tbl := la.adapt.Partial()
	if tbl == nil || int(tbl[1]) >= r {
		t.Fatalf("at 5%% loss %d:%d, the table %v gives a lone packet no less than R", k, r, tbl)
	}
	before := sa.stats.c[ParityOut]
	inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, 1))
	sa.now = sa.now.Add(time.Second)
	sa.tick()
	sa.flushAll()
	if got := sa.stats.c[ParityOut] - before; got != uint64(tbl[1]) {
		t.Fatalf("a lone packet's group sent %d parity, want the table's %d (R=%d)", got, tbl[1], r)
	}
}

// autoLane is shard A's lane to B, installed with FEC = auto and the
// start-up guess (k0:r0), a flow source for it, and a way to hand it the
// peer's loss reports.
type autoLane struct {
	t      *testing.T
	sa     *Shard
	la     *lane
	k0, r0 int
	seq    int
}

func newAutoLane(t *testing.T) *autoLane {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa := a.shards[0]
	installAuto(t, a, b, 50*time.Millisecond)
	la := sa.table.lanes[addrB]
	k0, r0 := la.adapt.Ratio()
	return &autoLane{t: t, sa: sa, la: la, k0: k0, r0: r0}
}

// report hands the lane the peer's loss report rep.
func (l *autoLane) report(rep fec.LossReport) {
	l.t.Helper()
	body, err := rep.AppendBinary([]byte{ctlLossReport})
	if err != nil {
		l.t.Fatal(err)
	}
	l.sa.control(l.la, body)
}

// inject sends n packets on the lane, within the current timer tick.
func (l *autoLane) inject(n int) {
	l.t.Helper()
	for range n {
		l.seq++
		inject(l.t, l.sa, ipPacket("10.1.0.5", "10.2.0.9", 1000, l.seq))
	}
}

// tick sends n packets, then lets a timer tick (idlePoll) pass.
func (l *autoLane) tick(n int) {
	l.t.Helper()
	l.inject(n)
	l.sa.now = l.sa.now.Add(idlePoll)
	l.sa.tick()
	l.sa.flushAll()
}

// Clean reports of a few pings take the start-up guess off the encoder
// before the adapter acted on any interval; pings a tick apart, or fewer
// than flowPackets packets within one, leave it off, and a flow's first
// window brings it back at its flowPackets-th packet, before any report
// of the flow could.
func TestFlowAfterPingsGetsStartGuess(t *testing.T) {
	l := newAutoLane(t)
	clean := fec.LossReport{Expected: 2, Received: 2}
	for range 3 {
		l.report(clean)
	}
	if _, r := l.la.cur.enc.Ratio(); r != 0 {
		t.Fatalf("after three clean ping reports: R %d, want none", r)
	}
	for range 2 * flowPackets {
		l.tick(1)
	}
	l.tick(flowPackets - 1)
	if _, r := l.la.cur.enc.Ratio(); r != 0 {
		t.Fatalf("pings a tick apart, or %d packets in one, brought parity back: R %d", flowPackets-1, r)
	}
	// A flow's first window: from its flowPackets-th packet on, at once.
	before := l.sa.stats.c[ParityOut]
	l.inject(flowPackets)
	if k, r := l.la.cur.enc.Ratio(); k != l.k0 || r != l.r0 || l.la.cur.enc.Depth() != fec.MaxDepth {
		t.Fatalf("a flow's first window: %d:%d depth %d, want the start-up guess %d:%d depth %d", k, r, l.la.cur.enc.Depth(), l.k0, l.r0, fec.MaxDepth)
	}
	l.sa.now = l.sa.now.Add(time.Second)
	l.sa.tick()
	l.sa.flushAll()
	// The packet that brought the guess back closes its group alone: the
	// guess's parity for a group of one (fec.Adapter.Partial).
	if got, want := l.sa.stats.c[ParityOut]-before, l.la.adapt.Partial()[1]; got != uint64(want) || want < 2 {
		t.Fatalf("the window's group closed early with %d parity, want the guess's %d for a group of one", got, want)
	}
}

// Clean reports of pings that take the start-up guess off while a flow
// already sends, past its flowPackets-th packet this tick, leave the
// guess on: the packet that tells the adapter of a flow has gone by.
func TestCleanReportsMidFlowKeepStartGuess(t *testing.T) {
	l := newAutoLane(t)
	clean := fec.LossReport{Expected: 2, Received: 2}
	for range 2 {
		l.report(clean)
	}
	l.inject(flowPackets + 2)
	l.report(clean) // the third clean report, mid-window
	if k, r := l.la.cur.enc.Ratio(); k != l.k0 || r != l.r0 {
		t.Fatalf("a clean report while a flow sends: %d:%d, want the start-up guess %d:%d", k, r, l.k0, l.r0)
	}
}

// A flow that starts on a lane that carried pings: a loss report that
// comes within minRateInterval of the last (the rate since then is not
// taken) sizes the groups by the last timer tick's rate, not by the
// pings' (a first report sized on theirs gave a CUBIC flow's slow start
// 1:1 x2 on a channel losing in bursts).
func TestFirstReportSizesGroupsByRecentRate(t *testing.T) {
	l := newAutoLane(t)
	l.tick(1)
	l.report(fec.LossReport{Expected: 1, Received: 1})
	for range 40 { // two seconds of a ping a tick
		l.tick(1)
	}
	l.report(fec.LossReport{Expected: 40, Received: 40})
	for range 2 { // a flow: 100 packets a tick
		l.tick(100)
	}
	l.report(fec.LossReport{Expected: 300, Received: 285, Runs: 15}) // 100 ms after the last
	// 2000 packets a second fill a block of at least 16 within a flush
	// timeout; the pings' rate filled groups of 1.
	k, r := l.la.cur.enc.Ratio()
	if d := l.la.cur.enc.Depth(); k*d < 16 {
		t.Fatalf("a flow's first report after pings: %d:%d x%d, want blocks the flow's rate fills (flush %v)", k, r, d, l.la.cur.enc.FlushTimeout())
	}
}
