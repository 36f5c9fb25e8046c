package shard

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// Lanes: one lane's keys, framers and FEC state, and the router's commands
// that change which lanes a shard owns (InstallLane, SetLaneOwner,
// RemovePeer, through Do); the shard's lane table they change, which
// ingress.go asks by remote address and egress.go by peer and index, is
// table.go.

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
	// rekey's lane keeps the adapter, and so the ratio, it learned.
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
}

// lane is one lane's state; it lives in exactly one shard and is touched
// only by that shard's goroutine: no locks, no atomics.
type lane struct {
	cfg    LaneConfig
	sealer *crypto.Sealer
	txf    crypto.Framer
	enc    *fec.Encoder
	opener *crypto.Opener
	rxf    crypto.Framer
	dec    *fec.Decoder
	adapt  *fec.Adapter
	// reportAt and reportTx are when the last loss report arrived and
	// txPackets then: the lane's rate, which tells the adapter how much a
	// group can hold before its flush timeout.
	reportAt time.Time
	reportTx uint64
	// delay is the round trip the loss reports measure (delay.go).
	delay pathDelay
	// deliver is what the decoder hands this lane's data symbols to:
	// Shard.deliverSymbol bound to the lane, made once at install so
	// ingress passes it to the decoder without allocating.
	deliver fec.Deliver
	lastRx  time.Time
	// lastAsk is when a datagram that asks for an answer arrived under
	// these keys: data, or a control frame other than a keepalive. A
	// keepalive asks for none (as in WireGuard), or two idle lanes would
	// trade them forever.
	lastAsk time.Time

	// prev is the lane's previous keys after a rekey: packets and FEC
	// groups in flight under them still open, for prevKeep. A previous
	// keys' lane points back at the lane it belongs to (current), which
	// keeps the counters.
	prev      *lane
	current   *lane
	confirmed bool // a datagram arrived under these keys
	installed time.Time

	txPackets, txBytes, rxPackets, rxBytes uint64
	lastTx                                 time.Time
	// lastAskTx is when the lane last sent something that asks for an
	// answer (data, or a control frame other than a keepalive): only
	// such a send unanswered says the peer went silent (checkSilence).
	lastAskTx time.Time

	// Control-frame timers (control.go), redrawn each round.
	reportDue           time.Time
	reportsSent         int // loss reports sent: the first few go sooner
	kaWait, passiveWait time.Duration

	// slot is the lane's index in laneTable.owned (-1: not there); moves
	// counts the times an authenticated datagram from a new address moved
	// its remote (roam.go), carried over rekeys.
	slot  int
	moves uint64
	// misplacedAt is when the lane was last reported arriving on another
	// shard (place.go); silentAt when it was last reported silent
	// (control.go).
	misplacedAt, silentAt time.Time
	// oldFraming: a datagram from the lane's remote was framed by wire
	// version 1 (noteOldFraming, after v1Tries tries); checkSilence says so.
	oldFraming bool
	v1Tries    uint8
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
	// (control.go). The hello exchange (control.go): helloDue, a
	// keepalive should go out at the next tick; heardPeer, a keepalive
	// with features arrived; acked, the peer's said it has ours; hellos,
	// the unacknowledged ones sent, at most maxHellos, helloAt apart.
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

	// decDirty: the decoder may have counted something since publish
	// last folded it. encBusy: the encoder may hold a partial group
	// (tick skips the encoders of idle lanes).
	decDirty, encBusy bool

	// folded is the decoder's counters as last added to the shard's:
	// the shard keeps the totals because a rekey or removal drops the
	// decoder with its counts (Shard.foldDecoder).
	folded fec.Stats
	// fecCarry is what the decoders of keys the lane no longer holds
	// counted (a rekey drops them: dropKeys), so its FEC counts in show
	// and the per-peer metrics never go down (Prometheus counters).
	fecCarry struct{ recovered, lost uint64 }
}

// fecCounts is ln's data symbols recovered and lost for good, under every
// key it has held.
func (ln *lane) fecCounts() (recovered, lost uint64) {
	recovered, lost = ln.fecCarry.recovered, ln.fecCarry.lost
	for l := ln; l != nil; l = l.prev {
		st := l.dec.Stats()
		recovered += st.Recovered
		lost += st.LostData
	}
	return recovered, lost
}

// sendKeys is the lane whose keys seal what ln sends: its previous keys
// while a rekey responder waits for the peer to use the new ones.
func (ln *lane) sendKeys() *lane {
	if !ln.confirmed && ln.prev != nil {
		return ln.prev
	}
	return ln
}

// heard is when ln last received an authenticated datagram, under its
// current or its previous keys.
func (ln *lane) heard() time.Time {
	if ln.prev != nil && ln.prev.lastRx.After(ln.lastRx) {
		return ln.prev.lastRx
	}
	return ln.lastRx
}

// asked is when ln last received a datagram that asks for an answer
// (lastAsk), under its current or its previous keys.
func (ln *lane) asked() time.Time {
	if ln.prev != nil && ln.prev.lastAsk.After(ln.lastAsk) {
		return ln.prev.lastAsk
	}
	return ln.lastAsk
}

func newLane(cfg LaneConfig) (*lane, error) {
	enc, err := fec.NewEncoder(cfg.FEC)
	if err != nil {
		return nil, err
	}
	var ad *fec.Adapter
	if cfg.Mode.Kind == fec.ModeAuto {
		if ad, err = fec.NewAdapter(cfg.Mode, fec.AdaptConfig{}); err != nil {
			return nil, err
		}
	}
	ln := &lane{
		adapt:  ad,
		cfg:    cfg,
		sealer: crypto.NewSealer(&cfg.Send.AEAD),
		txf:    crypto.NewFramer(&cfg.Send),
		enc:    enc,
		opener: crypto.NewOpener(&cfg.Recv.AEAD),
		rxf:    crypto.NewFramer(&cfg.Recv),
		dec:    fec.NewDecoder(cfg.Window),
		slot:   -1,
		// xorshift32 needs a seed other than zero.
		sizeRand: rand.Uint32() | 1,
	}
	ln.setRTT(cfg.RTT)
	return ln, nil
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
		ln.enc.SetFlushTimeout(fec.FlushFor(rtt))
	}
}

// InstallLane adds a lane this shard owns, or replaces the lane's keys
// (rekey, or the peer restarted): the old lane stays as prev for a while so
// packets and FEC groups in flight under the old keys still open. Call it on
// the shard's goroutine (through Do) or before Run.
func (s *Shard) InstallLane(cfg LaneConfig) error {
	if cfg.Conn < 0 || cfg.Conn >= len(s.cfg.Conns) {
		return fmt.Errorf("shard %d: lane conn %d out of range", s.id, cfg.Conn)
	}
	if cfg.Index < 0 || cfg.Index >= cfg.Lanes {
		return fmt.Errorf("shard %d: lane %d of %d", s.id, cfg.Index, cfg.Lanes)
	}
	ln, err := newLane(cfg)
	if err != nil {
		return err
	}
	ln.installed = s.now
	ln.reportDue = s.now.Add(jitter(lossReportFirst))
	ln.drawWaits()
	s.bindDeliver(ln)
	pl := s.table.entry(cfg.Peer, cfg.Lanes)
	top := pl.local[cfg.Index]
	ln.offered = cfg.Offered
	if !ln.offered.IsValid() {
		ln.offered = cfg.Remote
	}
	if top != nil && top.offered == ln.offered && ln.offered == cfg.Remote && top.cfg.Remote != cfg.Remote {
		// Same peer sockets as before: keep the address its datagrams
		// proved (a NAT rewrote the offered port), or every rekey would
		// send to a port the NAT does not map.
		ln.cfg.Remote = top.cfg.Remote
		// The handshake proved nothing about that address.
		ln.cfg.Proven, ln.cfg.Asked = false, false
		// The router steered the offered address before the response
		// (router/plane.go); the lane stays at the proven one.
		s.table.dropEarlySteer(ln.offered, cfg.Conn)
	}
	if top != nil {
		ln.inherit(top)
	}
	// A responder's install is not proof (anyone can send an initiation
	// from another peer's address): a lane refused the address is found by
	// trial (roam.go) until its first datagram completes the handshake.
	p := unproven
	if ln.cfg.Proven {
		p = handshakeProof
	}
	s.table.install(pl, ln, top, p, s.now)
	if top != nil {
		s.keepPrev(ln, top)
	}
	ln.delay.noteHandshake(cfg.RTT, s.now) // an initiator's: this handshake's
	ln.confirmed = !cfg.HoldTx
	ln.reported = ln.cfg.Remote
	s.releaseWaiting(cfg.Peer)
	return nil
}

// inherit takes over what top, the lane ln replaces at a rekey, learnt
// that outlives its keys: counters, the adapter's ratio, the path's round
// trip and delay, the peer's features and the lengths it sent. The keys,
// FEC windows and timers are ln's own.
func (ln *lane) inherit(top *lane) {
	ln.txPackets, ln.txBytes, ln.rxPackets, ln.rxBytes = top.txPackets, top.txBytes, top.rxPackets, top.rxBytes
	ln.moves = top.moves
	ln.steerFull = top.steerFull     // counted once per lane, not per rekey
	ln.reportsSent = top.reportsSent // a rekey is not a fresh start
	ln.fecCarry = top.fecCarry
	if top.cfg.Remote == ln.cfg.Remote {
		ln.delay = top.delay.carried() // same path
	}
	if top.adapt != nil && ln.adapt != nil && top.cfg.Mode == ln.cfg.Mode {
		// Same path, same loss: a rekey keeps what the loss reports
		// taught the adapter instead of starting over every two
		// minutes (a lossy path would lose packets after each).
		ln.adapt = top.adapt
		ln.setRTT(ln.cfg.RTT)
	}
	if ln.rtt == 0 && top.rtt > 0 {
		ln.setRTT(top.rtt) // a responder's, learnt from the peer
	}
	// Same peer process, most likely: what it reads and what the
	// lane's data looks like carry over until its hello says else.
	ln.peerFeatures = top.peerFeatures
	ln.applyFEC()
	ln.sizes, ln.sizeN, ln.sizePub, ln.sizeRand = top.sizes, top.sizeN, top.sizePub, top.sizeRand
}

// keepPrev makes top's keys (or, if the peer never used them, the ones
// before) ln's previous keys, and drops any older ones.
func (s *Shard) keepPrev(ln, top *lane) {
	old := top
	if !old.confirmed && old.prev != nil {
		// The peer never used old's keys (e.g. our response to its
		// rekey was lost and it retried): the keys it still has are
		// old.prev's, so keep those as prev.
		s.dropKeys(ln, old)
		old = old.prev
	}
	if old.prev != nil {
		s.dropKeys(ln, old.prev)
	}
	old.prev = nil
	// The peer that holds the previous keys is the one that just
	// handshook (a restarted peer holds none): at its new address.
	old.cfg.Remote = ln.cfg.Remote
	old.current = ln
	ln.prev = old
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
