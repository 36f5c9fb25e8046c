package shard

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/tcpts"
)

// Lanes: one lane's path and what it learnt (its keys are keyset.go), and
// the router's commands that change which lanes a shard owns (InstallLane,
// SetLaneOwner, RemovePeer, through Do); the shard's lane table they
// change, which ingress.go asks by remote address and egress.go by peer
// and index, is table.go.

// LaneConfig is what the router hands a shard to install a lane it owns.
type LaneConfig struct {
	Peer   PeerID
	Index  int               // lane index within the session
	Lanes  int               // lanes in the session
	Remote netip.AddrPort    // the peer's address for this lane
	Conn   int               // which of the shard's sockets sends and receives it
	Send   crypto.LaneKeys   // our sending keys for this lane
	Recv   crypto.LaneKeys   // our receiving keys for this lane
	FEC    fec.EncoderConfig // initial K:R (R=0: off)
	Window fec.DecoderConfig // decoder bounds
	// HoldTx keeps sending with the lane's previous keys until a datagram
	// arrives under the new ones: the responder of a rekey does this, so
	// the initiator never sees new-key data before it has the new keys.
	HoldTx bool
	// Mode, when auto, lets the peer's loss reports set K:R (fec.Adapter);
	// FEC above is then only the starting ratio of a new peer's lane: a
	// rekey keeps the lane's adapter, and so the ratio it learned.
	Mode fec.Mode
	// RTT is the path's round-trip time as the handshake measured it (the
	// initiator's, from initiation to response; 0: unknown, as on a
	// responder, whose lane learns it from the initiator's keepalives).
	// The adapter aims for less residual loss on longer paths.
	RTT time.Duration
	// Keepalive is the peer's PersistentKeepalive (0: off): a keepalive
	// goes out after about this long without sending (control.go).
	Keepalive time.Duration
	// Offered is the address the peer offered for this lane (its IP and
	// offered port) when Remote is something else: the source a lane's
	// initiation came from (a NAT may have rewritten the port). Zero:
	// Remote is the offered address.
	Offered netip.AddrPort
	// Proven: a completed handshake showed the peer at Remote (as
	// initiator, the response came from where the initiation went), so
	// the lane takes the address from any other peer's lane (claim.go).
	Proven bool
	// Asked: Remote is where the initiation of this (responder's) session
	// came from, and so where the response went: the first datagram
	// under the new keys from Remote completes the handshake there
	// (claim.go). The session's other lanes' remotes are offered ports
	// our response never reached.
	Asked bool
	// Local is the address of ours the peer's handshake was sent to, which
	// the lane's datagrams leave from (udp.Batch.Local) on a socket with
	// per-datagram addresses; zero: the routing table picks.
	Local netip.Addr
	// Lens is the peer's sample of sent data lengths, shared by all its
	// lanes, which the lane adds its data lengths to (nil: none); the
	// router draws the peer's handshake lengths from it.
	Lens *WireLens
	// Bursts is the loss bursts the peer's lanes measured on its path,
	// shared by all of them (fec.PathBursts; nil: none): the lane's
	// adapter predicts with them until it measures its own.
	Bursts *fec.PathBursts
}

// lane is one lane: the path to one of the peer's sockets and what it
// learnt, which outlives keys (counters, timers, the peer's features, the
// FEC adapter and the path's delay, the lengths it carries, its place in
// the lane table), and the keys it uses now and used before (keyset.go). A
// rekey swaps its keysets; the lane stays. It lives in exactly one shard
// and is touched only by that shard's goroutine: no locks, no atomics.
type lane struct {
	// cfg is the config of the lane's latest session, with the path
	// (Remote, Local) as moves set it since (roam.go); the keys in it are
	// cur's.
	cfg LaneConfig
	// cur is the keys of the lane's session; prev, after a rekey, the
	// session's before, kept for prevKeep so packets and FEC groups in
	// flight under them still open (nil: none).
	cur, prev *keyset
	adapt     *fec.Adapter
	// ts is what the lane delivered of each TCP flow, the timestamp
	// recovered segments are raised to among it, noted while tsOn:
	// until tsKeep after the last parity arrived (parityAt); nil while
	// not (timestamps.go).
	ts       *tcpts.Table
	parityAt time.Time
	tsOn     bool
	// reportAt, reportTx and reportLarge are when the last loss report
	// arrived and txPackets and txLarge then: the lane's rate, which
	// tells the adapter how much a group can hold before its flush
	// timeout, and how many of its packets were not small (SetSent).
	reportAt              time.Time
	reportTx, reportLarge uint64
	// held is a loss report of the peer's that arrived at heldAt, which
	// the adapter hears at heldUntil, when the round-trip samples that
	// judge it have arrived (delayjudge.go; Expected 0: none); heldBound:
	// its losses fell mostly outside its split's clear slices
	// (splitCounts.outside), so its runs only bound the bursts.
	held              fec.LossReport
	heldAt, heldUntil time.Time
	heldBound         bool
	// delay is the round trip the loss reports measure (delay.go);
	// split the peer's datagrams between its frames, channel the loss
	// rate its splits gave, lastSplit the split of its last loss report
	// (split.go). newPath starts them anew.
	delay     pathDelay
	split     lossSplit
	channel   channelLoss
	lastSplit splitCounts
	// pathAt is when the lane's path began (when it was installed, or
	// newPath): bursts its peer's lanes measured before say nothing of
	// it (a lane made for a session from the peer's new address would
	// otherwise borrow what the old one measured).
	pathAt time.Time
	// lastRx is when the lane last received an authenticated datagram,
	// under any of its keys; lastAsk when one that asks for an answer
	// arrived: data, or a control frame other than a keepalive. A
	// keepalive asks for none (as in WireGuard), or two idle lanes would
	// trade them forever.
	lastRx, lastAsk time.Time

	txPackets, txBytes, rxPackets, rxBytes uint64
	// txLarge counts the data packets sent whose symbols are not small
	// (fec.SmallSymbol).
	txLarge uint64
	// txDgrams and rxDgrams count the datagrams the lane sent and
	// received (data, parity, control) for the loss split (split.go).
	txDgrams uint32
	rxDgrams uint64
	lastTx   time.Time
	// askSince is when the lane first sent something that asks for an
	// answer (data, or a control frame other than a keepalive) after it
	// last heard from the peer: only such a send unanswered says the peer
	// went silent, and the wait starts there, not at the last receive, so
	// a lane that resumes after an idle spell is not silent (asked,
	// checkSilence).
	askSince time.Time

	// Control-frame timers (control.go), redrawn each round.
	reportDue   time.Time
	reportsSent int // loss reports sent
	// sizingReports counts the loss reports sent that counted at least
	// sizingExpected symbols: the first earlyReports of them go sooner,
	// no closer than earlyReportGap after reportedAt, the last one's time.
	sizingReports int
	reportedAt    time.Time
	// stampAt is when the lane next sends a stamp if it is busy, and
	// stampPkts its packets (sent and received) when it last looked
	// (controlTimers, delayjudge.go).
	stampAt             time.Time
	stampPkts           uint64
	kaWait, passiveWait time.Duration
	// tickTx and tickLarge are txPackets and txLarge at the lane's last
	// timer tick (flowPackets, sendData), tickAt when that was, and
	// tickRate the packets per second it sent between its last two ticks
	// (the adapter's fill, lossReport).
	tickTx, tickLarge uint64
	tickAt            time.Time
	tickRate          float64
	// quietAt is the first of the timer ticks in a row that found the
	// lane quiet (fec.Adapter.SetTickFill; zero: it sends), for
	// restartIdle.
	quietAt time.Time

	// slot is the lane's index in laneTable.owned (-1: not there); moves
	// counts the times an authenticated datagram from a new address moved
	// its remote (roam.go).
	slot  int
	moves uint64
	// misplacedAt is when the lane was last reported arriving on another
	// shard (place.go); silentAt when it was last reported silent
	// (control.go).
	misplacedAt, silentAt time.Time
	// steered: the listen group's map sends this lane's remote to its
	// socket (steer.go), so datagrams arriving elsewhere need no move;
	// steeredAt: since when; steerFull: the map refused it for room
	// (counted once).
	steered, steerFull bool
	steeredAt          time.Time
	// title is how the lane holds the address it is bound to (claim.go),
	// while it is.
	title   title
	movedAt time.Time // last Config.Moved report (roam.go)
	// reported is the remote the router last heard of (install or
	// Moved); movePending: a move waits for the report rate limit.
	reported    netip.AddrPort
	movePending bool
	// followTo: where FollowPeer proposed to move the lane at followAt,
	// if it hears nothing from its current address meanwhile (roam.go).
	followTo netip.AddrPort
	followAt time.Time
	// offered is the address the peer offered for the lane; a rekey that
	// offers the same (and brings no observed source for this lane) keeps
	// the remote the lane learned since (a NAT's port).
	offered netip.AddrPort

	// rtt is the round trip the lane's keepalives tell the peer (0:
	// unknown): LaneConfig.RTT, or what the peer's keepalives told.
	// peerFeatures are the feature bits the peer's keepalives announce
	// (control.go). The hello exchange (control.go), the session's: a
	// rekey starts it over. helloDue, a keepalive should go out at the
	// next tick; heardPeer, a keepalive with features arrived; acked,
	// the peer's said it has ours; hellos, the unacknowledged ones sent,
	// at most maxHellos, helloAt apart.
	rtt          time.Duration
	peerFeatures uint8
	helloDue     bool
	heardPeer    bool
	acked        bool
	hellos       int
	helloAt      time.Time

	// sizes sample the lengths of the lane's data and parity datagrams,
	// sent and received, as inner lengths (the datagram's length less
	// crypto.DataOverhead; a ring; sizeN counts writes): control frames
	// are padded to one of them (control.go), and publish adds those written since
	// sizePub to the peer's WireLens (cfg.Lens) for its handshakes. Both
	// directions, because control frames and handshakes go both ways at
	// about the same rate while data often flows mostly one way: drawn
	// from one direction's lengths, the frames of the quiet direction
	// would be small where most data datagrams are large. Once the ring
	// is full only one packet in sizeEvery (at random: sizeRand) is
	// written, so the ring spans the last few hundred packets: the
	// handful of small packets that end a transfer (its last ACKs, FIN)
	// do not set the lengths of everything sent while the lane then
	// idles.
	sizes    [32]uint16
	sizeRand uint32
	sizeN    uint32
	sizePub  uint32

	// fecCarry is what the decoders of keys the lane no longer holds
	// counted (dropKeys), so its FEC counts in show and the per-peer
	// metrics never go down (Prometheus counters).
	fecCarry struct{ recovered, lost uint64 }
}

// newAdapter is the FEC adapter of a lane in mode m: nil unless auto.
func newAdapter(m fec.Mode) (*fec.Adapter, error) {
	if m.Kind != fec.ModeAuto {
		return nil, nil
	}
	return fec.NewAdapter(m, fec.AdaptConfig{})
}

// setRTT records the path's round-trip time (zero: unknown, a no-op): the
// adapter aims for the residual loss TCP needs at it, and the encoder waits
// fec.FlushFor(rtt) for a group to fill, unless the lane's config fixed the
// flush timeout.
func (ln *lane) setRTT(rtt time.Duration) {
	if rtt <= 0 {
		return
	}
	ln.rtt = rtt
	if ln.adapt != nil {
		ln.adapt.SetRTT(rtt)
	}
	if ln.cfg.FEC.FlushTimeout == 0 {
		ln.cur.enc.SetFlushTimeout(fec.FlushFor(rtt))
	}
}

// InstallLane adds a lane this shard owns, or gives the lane new keys
// (rekey, or the peer restarted): its keys so far stay as its previous
// ones for a while, so packets and FEC groups in flight under them still
// open. Call it on the shard's goroutine (through Do) or before Run.
func (s *Shard) InstallLane(cfg LaneConfig) error {
	if cfg.Conn < 0 || cfg.Conn >= len(s.cfg.Conns) {
		return fmt.Errorf("shard %d: lane conn %d out of range", s.id, cfg.Conn)
	}
	if cfg.Index < 0 || cfg.Index >= cfg.Lanes {
		return fmt.Errorf("shard %d: lane %d of %d", s.id, cfg.Index, cfg.Lanes)
	}
	ks, err := newKeyset(&cfg, s.now)
	if err != nil {
		return err
	}
	ad, err := newAdapter(cfg.Mode)
	if err != nil {
		return err
	}
	pl := s.table.entry(cfg.Peer, cfg.Lanes)
	ln := pl.local[cfg.Index]
	offered := cfg.Offered
	if !offered.IsValid() {
		offered = cfg.Remote
	}
	if ln != nil && ln.offered == offered && offered == cfg.Remote && ln.cfg.Remote != cfg.Remote {
		// Same peer sockets as before: keep the address its datagrams
		// proved (a NAT rewrote the offered port), or every rekey would
		// send to a port the NAT does not map.
		cfg.Remote = ln.cfg.Remote
		// The handshake proved nothing about that address.
		cfg.Proven, cfg.Asked = false, false
		// The group claimed the offered address before the response
		// (Group.InstallSession); the lane stays at the proven one.
		s.table.dropEarlySteer(offered, cfg.Conn)
	}
	// A responder's install is not proof (anyone can send an initiation
	// from another peer's address): a lane refused the address is found by
	// trial (roam.go) until its first datagram completes the handshake.
	p := unproven
	if cfg.Proven {
		p = handshakeProof
	}
	if ln == nil {
		ln = &lane{
			cfg: cfg, cur: ks, adapt: ad, slot: -1, pathAt: s.now,
			// xorshift32 needs a seed other than zero.
			sizeRand: rand.Uint32() | 1,
		}
		ln.setRTT(cfg.RTT)
		ln.reportDue = s.now.Add(jitter(lossReportEvery))
		ln.drawWaits()
		s.bindDeliver(ln, ks)
		// The adapter's depth and partial table from the first packet
		// (cfg.FEC holds a ratio only): a flow's first window sent at
		// depth 1 until the peer's first hello lost 8 of 10 packets to
		// one burst.
		ln.applyFEC()
		ln.offered = offered
		s.table.install(pl, ln, p, s.now)
	} else {
		s.table.leave(ln, cfg.Remote, cfg.Conn)
		s.rekey(ln, cfg, ks, ad)
		ln.offered = offered
		s.table.settle(ln, p, s.now)
	}
	ln.delay.noteHandshake(cfg.RTT, s.now) // an initiator's: this handshake's
	ln.reported, ln.movePending = ln.cfg.Remote, false
	s.table.stir(ln) // new keys: hellos, the first reports
	s.releaseWaiting(cfg.Peer)
	return nil
}

// rekey gives ln, a lane this shard owns, the keys ks and the config cfg of
// its new session (ad: the adapter cfg's FEC mode makes). Whatever the
// lane learnt stays (counters, the peer's features, the lengths it
// carries, the report schedule; the adapter's ratio if the mode did not
// change, so a lossy path does not lose packets after every rekey; the
// path's delay if the address did not change; the round trip if the
// handshake measured none, as on a responder). What belongs to the
// session starts over: the keys (rotate), the hello exchange (the peer may
// have restarted as an older router, which reads no padded hello), and a
// follow proposed before the handshake, which says where the peer is now.
// The lane table has let go of an address the lane leaves
// (laneTable.leave), and gives it its new one after (settle).
func (s *Shard) rekey(ln *lane, cfg LaneConfig, ks *keyset, ad *fec.Adapter) {
	if cfg.Remote == ln.cfg.Remote {
		ln.delay = ln.delay.carried() // same path
		ln.split.noteRekey()
	} else {
		ln.newPath(s.now)
	}
	if cfg.Mode != ln.cfg.Mode {
		ln.adapt = ad
		ln.held = fec.LossReport{} // the old adapter's
	}
	ln.cfg = cfg
	s.bindDeliver(ln, ks)
	s.rotate(ln, ks)
	rtt := cfg.RTT
	if rtt <= 0 {
		rtt = ln.rtt // a responder's, learnt from the peer
	}
	ln.setRTT(rtt)
	// Same peer process, most likely: what it reads carries over until
	// its hello says else, but for long FEC groups, which a peer that
	// restarted as an older router would refuse whole (data included)
	// until its hello: those wait for the new keys' hello, a second.
	ln.peerFeatures &^= FeatureLongGroups
	ln.applyFEC()
	ln.helloDue, ln.heardPeer, ln.acked, ln.hellos, ln.helloAt = false, false, false, 0, time.Time{}
	ln.followTo = netip.AddrPort{}
	ln.drawWaits() // cfg.Keepalive may be new
}

// SetLaneOwner records that lane index of peer is owned by shard owner and
// reached at remote (invalid: not known here), so this shard hands that
// lane's packets over; recv (nil: unchanged) are the lane's receive keys,
// kept to recognise its datagrams if they arrive here (place.go). A remote
// shared with a lane this shard owns (an initiator's lanes all talk to the
// responder's one listening port, told apart by our local socket) stays
// with the local lane: the kernel already steered it by local port.
func (s *Shard) SetLaneOwner(peer PeerID, lanes, index, owner int, remote netip.AddrPort, recv *crypto.LaneKeys) {
	s.table.setOwner(s.table.entry(peer, lanes), index, owner, remote, recv)
	if owner != s.id {
		s.releaseWaiting(peer)
	}
}

// RemovePeer forgets every lane of peer, the hand-over entries that point
// at its lanes on other shards, and the packets waiting for it.
func (s *Shard) RemovePeer(peer PeerID) {
	s.table.removePeer(peer)
	if q := s.waiting[peer]; q != nil {
		for _, p := range q.pkts {
			s.count(DropNoSession)
			s.release(p)
		}
		s.waitTotal -= len(q.pkts)
		delete(s.waiting, peer)
	}
}

// largeThisTick is how many packets larger than fec.SmallSymbol the lane
// sent since its last timer tick: a flow from the flowPackets-th on.
func (ln *lane) largeThisTick() uint64 { return ln.txLarge - ln.tickLarge }

// restartAfter is how long the lane's ticks must have been quiet for a
// flow that then starts to be a new one: restartIdle, or longer than a
// BBR flow's ProbeRTT at the lane's round trip (a steady flow would
// otherwise take the start-up guess every ten seconds).
func (ln *lane) restartAfter() time.Duration { return max(restartIdle, probeRTT+2*ln.rtt) }
