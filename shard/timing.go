package shard

import (
	"time"

	"github.com/yip-router/yip-router/fec"
)

// sizingExpected is how many symbols a loss report must count for the
// peer's adapter to size its FEC by it (smaller ones it merges with the
// next).
var sizingExpected = fec.DefaultAdaptConfig.MinExpected

// The shard's timing constants: the lanes' timers and the loop's. Some
// that tune one mechanism stay beside it: how long an address stays a
// lane's (addrHold, claim.go), how often a misplaced lane is reported
// (misplacedEvery, place.go) or a move (once a second per lane,
// reportMove in roam.go), the strangers' budget per loop (strangerTime,
// loop_linux.go) and the one-way delay samples' ages (delay.go). The
// control plane's timers (rekey, handshake retries, session expiry) are in
// control/timing.go; the FEC encoder's flush of a partial group
// (fec.DefaultFlushTimeout, 5 ms) and the decoder's group lifetime
// (fec.DefaultGroupTTL, 250 ms) are the fec package's defaults.
const (
	// idlePoll is the longest a shard sleeps with nothing scheduled, and
	// how often the lanes' timers run and counters are published (FEC
	// flush deadlines wake the loop on their own, through fecDue, for the
	// encoders that hold a partial group: tickFEC). Decoder expiry (250
	// ms groups), waiting packets' age (3 s) and counter publication need
	// no finer clock; published counters are at most this old.
	idlePoll = 50 * time.Millisecond
	// idleAfter is how long a lane must have sent and received nothing
	// for tick to visit it only every idleTick (Shard.idleWake).
	idleAfter = time.Second
	idleTick  = 250 * time.Millisecond

	// tsKeep is how long after a lane's last parity symbol it keeps
	// noting TCP timestamps for the segments FEC recovers
	// (timestamps.go): longer than a group stays open for recovery
	// (fec.DefaultGroupTTL); the lanes' timers end it, at most idleTick
	// late.
	tsKeep = 2 * time.Second

	// waitMaxAge is how long a packet waits for its peer's handshake
	// before it is dropped: long enough for an initiation and its first
	// retries (the control core retries after 1 s, then 2 s more), while the
	// waiting buffers come out of the shard's pool. Older packets are
	// stale: the inner transport (TCP's initial RTO is 1 s) has sent
	// them again by then.
	waitMaxAge = 3 * time.Second

	// noSessionAsk is how often, at most, a shard tells the control core
	// (Config.NoSession) that packets wait for a peer: the control core starts
	// and retries handshakes on its own timers, so once a second is enough
	// to start one and bounds the calls into the control core from a busy shard.
	noSessionAsk = time.Second

	// helloEvery: a lane repeats its hello (a keepalive with its features
	// and round trip, control.go) about this often until the peer
	// acknowledges it.
	helloEvery = time.Second

	// prevKeep is how long a lane keeps its previous keys after a rekey,
	// counted from the install and only once the new keys are confirmed:
	// datagrams and FEC groups still in flight under the old keys keep
	// opening. It is far longer than a datagram stays in flight or a group
	// in the decoder (250 ms), and short enough that old keys do not
	// linger.
	prevKeep = 15 * time.Second

	// passiveKeepalive: a lane that heard data or a control frame other
	// than a keepalive from its peer since it last sent, and has sent
	// nothing for about this long, sends a keepalive
	// (controlTimers), so one-way traffic does not look like a dead peer.
	// With its jitter it stays well under the lanes' no-reply limit
	// (5 s): the peer hears from us within 2.5 s.
	passiveKeepalive = 2 * time.Second

	// lossReportEvery is about how often a lane that received data
	// reports its FEC loss to the peer (whose encoder adapts R to it).
	lossReportEvery = time.Second
	// earlyReports: a lane's first loss reports that count enough
	// symbols to size the peer's FEC (sizingExpected, lane.sizingReports)
	// go as soon as the decoder has counted them (but earlyReportGap
	// apart), not a second apart: a fresh lane's FEC starts at a guess,
	// and a loss-based TCP flow that meets loss while the guess stands (its
	// slow start, on a lossy path) leaves slow start with a small window
	// it then grows back only slowly at a long round trip. A ping or two
	// before the first flow do not use them up.
	earlyReports = 4
	// earlyReportGap: an early report waits at least this long (or the
	// path's judgeLag, if longer) after the early report before it, so the
	// peer judges each by its round-trip samples before the next arrives,
	// and its adapter's window and clean run still span a few hundred
	// milliseconds. The first waits for nothing but its count.
	earlyReportGap = 250 * time.Millisecond

	// stampEvery is about how often a busy lane sends a stamp-only
	// report between its loss reports (delayjudge.go): the peer takes
	// about ten round-trip samples a second, enough to see a queue's
	// overflow, which lasts tens of milliseconds. busyPackets is what a
	// lane must have sent and received since its last look to be busy:
	// then the stamps are at most one datagram in busyPackets.
	stampEvery  = 100 * time.Millisecond
	busyPackets = 32

	// flowPackets is the packet larger than fec.SmallSymbol within one
	// timer tick (idlePoll, 50 ms, apart while a lane is in use) at which
	// sendData tells the lane's adapter that a flow started
	// (fec.Adapter.Busy), and which the start-up guess then protects,
	// with the rest of the window: more than pings send in a tick, and
	// early in a TCP flow's first window (10 segments). A download's ACKs
	// are small and never count: on a lane sized for them, the guess
	// would come back every tick.
	flowPackets = 4

	// restartIdle is the least a lane's ticks must have been quiet for
	// the flow that then starts to be a new one (fec.Adapter.Restart,
	// lane.restartAfter): about what Linux waits before it restarts a
	// connection's slow start after idle (its retransmission timeout,
	// 200 ms and up), and longer than a BBR flow's ProbeRTT (probeRTT
	// at 4 packets a round trip, after a round trip that drains its
	// queue) at round trips up to 150 ms.
	restartIdle = 500 * time.Millisecond
	probeRTT    = 200 * time.Millisecond

	// jitterFraction spreads every control-frame wait (loss reports, both
	// keepalives) uniformly over ±25% of its nominal value, drawn afresh
	// each time: no fixed period for a classifier to find.
	jitterFraction = 0.25

	// noReplyAfter: a lane whose first send that asks for an answer since
	// it last heard from its peer is this old reports the peer silent
	// (checkSilence), and the
	// control core starts a new handshake (the peer restarted and lost its keys),
	// as WireGuard does after its keepalive timeout. The peer's keepalives
	// (passive: about 2 s after it heard data or a control frame other
	// than a keepalive from us) keep a live lane well inside it; our own
	// keepalives ask for no answer and do not start the wait.
	noReplyAfter = 5 * time.Second
	// v1Checks: how many datagrams from a lane's own address that fail its
	// tag the lane tries as wire version 1 framed them (crypto.MatchesV1, a
	// hash over the whole datagram), to tell a peer of the previous
	// version (checkSilence). Only lanes, made by handshakes, pay it, and
	// each at most this often.
	v1Checks = 16

	// followQuiet: when one of a peer's lanes proves a new address, the
	// peer's other lanes follow at once if they heard nothing for this
	// long, else once they have heard nothing for this long after it
	// (roam.go, FollowPeer, followPending).
	followQuiet = 500 * time.Millisecond

	// roamTrialRate and roamTrialBurst bound the tag trials a shard spends
	// on datagrams that match no lane at their address (roam.go): one
	// trial costs the same at any datagram length (the tag hashes a digest
	// of at most 54 bytes, about 60-100 ns: crypto.BenchmarkDeframeJunk),
	// so 32768 a second cost a few percent of a core at most under any
	// flood, and a burst of 1024 finds a moved peer among that many lanes
	// at once while never stalling the loop for more than about 0.1 ms.
	roamTrialRate  = 32768
	roamTrialBurst = 1024

	// laneIdleTrim: a lane that received nothing for this long gives back
	// its FEC decoder's symbol slabs and codec caches (timers.go). Its
	// groups expired long before (250 ms); the next datagram regrows them.
	laneIdleTrim = 10 * time.Second

	// minRateInterval: the lane's rate, which tells its FEC adapter how
	// large a group fills within the flush timeout, is measured between
	// loss reports at least this far apart; two reports microseconds
	// apart (one delayed, one on time) would make it anything.
	minRateInterval = 200 * time.Millisecond
)
