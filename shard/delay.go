package shard

import (
	"encoding/binary"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A lane's round trip, measured all along from the loss reports both sides
// send about once a second, and the stamps a busy lane sends between them
// (control.go), so the FEC adapter can tell a bottleneck's queue
// overflowing from a lossy channel. Each report to a
// peer with FeatureDelayEcho carries, after its fec.LossReport:
//
//	0xEC ‖ stamp (4) ‖ echo (4) ‖ held (4)        big endian, microseconds
//
// The mark tells the extension from padding (zeros), which a report from a
// peer that holds stale features of ours (we upgraded since) carries
// instead. stamp is the sender's clock; echo the last stamp it received from the
// peer and held how long ago that was (noEcho: none yet). The peer's
// round trip is then its clock now − echo − held: the report it sent
// crossed the path one way (behind its data, in the queue its data builds)
// and this one came back. A busy lane also sends stamp-only reports
// between its loss reports, about ten a second, to a peer announcing
// FeatureLossSplit, so each loss report is judged by the samples of its
// own interval (delayjudge.go).
//
// A lane that receives nothing to report on (its peer's return traffic
// takes another lane) still answers each report of its peer's with one of
// its own, empty (Expected 0) but stamped, so the peer's next report has
// a stamp to echo. An empty report asks for no answer: two idle lanes do
// not trade them forever.

// delayEchoLen is the extension's length, echoMark its first byte.
const (
	delayEchoLen = 13
	echoMark     = 0xEC
)

// noEcho in held: no stamp of the peer's received yet.
const noEcho = ^uint32(0)

// maxDelaySample bounds a believable round trip: beyond it a sample is a
// stamp from before a long silence, or a broken peer's.
const maxDelaySample = 10 * time.Second

// delaySamples is how many slots of slotEvery the least round trip is
// taken over (each slot keeps its least sample): long enough that a queue
// which stands for a while is measured against the path without it, short
// enough that a new path (a roam) is learnt within half a minute. Slots,
// not samples, because a busy lane takes about ten samples a second
// (delayjudge.go) and a sparse one about one.
const delaySamples = 32

// slotEvery is a slot's length: under the shortest wait between two loss
// reports (a second less its jitter), so a sparse lane's samples each
// take a slot of their own.
const slotEvery = 750 * time.Millisecond

// queueMin is the least queueing delay taken as a queue: below it, jitter
// of a LAN's scheduling.
const queueMin = 2 * time.Millisecond

// sampleStale is how old the latest sample may be and still say what the
// path does now: reports come about a second apart.
const sampleStale = 3 * time.Second

// hsKeep is how long a handshake's round trip serves as the path's least:
// a few rekeys, so a route that grew longer at the same address is
// learnt anew.
const hsKeep = 10 * time.Minute

// EchoFeatures are what a peer must announce for the delay echo: the echo
// follows a LossReportLen report, and a reader of it reads padding.
const EchoFeatures = FeatureDelayEcho | FeatureLossRuns | FeaturePadding

// echoes reports whether ln's peer announced EchoFeatures: its reports
// carry the echo, and ours to it do.
func (ln *lane) echoes() bool { return ln.peerFeatures&EchoFeatures == EchoFeatures }

// stampEpoch is the zero of every lane's stamps: one per process, so a
// lane that moves between shards keeps one clock.
var stampEpoch = time.Now()

// stamp is t on the wire's 32-bit microsecond clock (it wraps every 71
// minutes; only differences of a few seconds are ever taken).
func stamp(t time.Time) uint32 { return uint32(t.Sub(stampEpoch) / time.Microsecond) }

// pathDelay is one lane's round-trip measurement.
type pathDelay struct {
	peerStamp uint32                      // the peer's last stamp
	peerAt    time.Time                   // when it arrived (zero: none yet)
	stampDue  bool                        // a report of the peer's (not empty) awaits one of ours
	ring      [delaySamples]time.Duration // each slot's least sample
	n, next   int
	slotAt    time.Time // when the latest slot began
	// recent holds the latest samples; judgedTo is the send time the
	// losses of the last report judged by them end at (delayjudge.go).
	recent   recentSamples
	judgedTo time.Time
	last     time.Duration // the latest sample (0: none)
	lastAt   time.Time     // when it was taken
	before   time.Duration // the sample before it (0: none)
	beforeAt time.Time     // when that was taken
	// hs is the least handshake round trip on this path within hsKeep
	// (0: none), hsAt when it was taken.
	hs   time.Duration
	hsAt time.Time
}

// noteHandshake takes a handshake's round trip on the path, measured at
// now: the least within hsKeep serves as the path's least round trip.
func (d *pathDelay) noteHandshake(rtt time.Duration, now time.Time) {
	if rtt > 0 && (d.hs == 0 || rtt <= d.hs || now.Sub(d.hsAt) > hsKeep) {
		d.hs, d.hsAt = rtt, now
	}
}

// appendEcho appends the extension for a report sent at now.
func (d *pathDelay) appendEcho(b []byte, now time.Time) []byte {
	held := noEcho
	if !d.peerAt.IsZero() {
		held = uint32(min(now.Sub(d.peerAt)/time.Microsecond, time.Duration(noEcho-1)))
	}
	d.stampDue = false
	b = append(b, echoMark)
	b = binary.BigEndian.AppendUint32(b, stamp(now))
	b = binary.BigEndian.AppendUint32(b, d.peerStamp)
	return binary.BigEndian.AppendUint32(b, held)
}

// readEcho takes the extension of a report received at now (b: the bytes
// after the fec.LossReport; false when they do not start with echoMark,
// padding): the peer's stamp for our next echo, and a round-trip sample
// if it echoes one of ours. A sample that cannot be (negative, past maxDelaySample) is
// dropped: the bytes are authenticated, but a peer may be broken.
func (d *pathDelay) readEcho(b []byte, now time.Time) bool {
	if len(b) < delayEchoLen || b[0] != echoMark {
		return false
	}
	d.peerStamp, d.peerAt = binary.BigEndian.Uint32(b[1:]), now
	echo, held := binary.BigEndian.Uint32(b[5:]), binary.BigEndian.Uint32(b[9:])
	if held == noEcho {
		return true
	}
	since := stamp(now) - echo // modular: the clock wraps
	if held > since {
		return true
	}
	rtt := time.Duration(since-held) * time.Microsecond
	if rtt > maxDelaySample {
		return true
	}
	d.sample(rtt, now, now.Add(-time.Duration(since)*time.Microsecond))
	return true
}

// sample takes a round-trip sample taken at now, of the stamp we sent at
// sent.
func (d *pathDelay) sample(rtt time.Duration, now, sent time.Time) {
	if d.n > 0 && now.Sub(d.slotAt) < slotEvery {
		i := (d.next + delaySamples - 1) % delaySamples
		d.ring[i] = min(d.ring[i], rtt)
	} else {
		d.ring[d.next] = rtt
		d.next = (d.next + 1) % delaySamples
		d.n = min(d.n+1, delaySamples)
		d.slotAt = now
	}
	d.recent.add(rtt, sent)
	d.before, d.beforeAt = d.last, d.lastAt
	d.last, d.lastAt = rtt, now
}

// carried is d for the lane a rekey installs on the same path: the path's
// samples and least handshake, but not the peer's last stamp, which a
// peer that restarted (a new process, a new clock) would read back as
// nonsense.
func (d pathDelay) carried() pathDelay {
	d.peerAt = time.Time{}
	return d
}

// latest is the latest round-trip sample (0: none).
func (d *pathDelay) latest() time.Duration { return d.last }

// least is the smallest of the recent samples (0: none).
func (d *pathDelay) least() time.Duration {
	if d.n == 0 {
		return 0
	}
	m := d.ring[0]
	for _, s := range d.ring[1:d.n] {
		m = min(m, s)
	}
	return m
}

// state is what the path's round trip says at now about the loss a report
// counts now: queued, drained (either way the loss is congestion), clear,
// or unknown without a sample of the last sampleStale or from a peer that
// does not echo (echo false). A sample finds a queue when it stands above
// the least round trip (of the recent slots, or of the path's handshakes
// if smaller; a handshake crosses an idle path, while a flow that keeps a
// queue standing from its first second on, as BBR's start-up does, leaves
// no sample without it) by half of it and at least queueMin.
//
// A busy lane has about ten samples over a report's interval, and is
// judged by them (judgeDense). A sparse lane has one or two: queued when
// the latest finds a queue; drained when it does not but the sample
// before it (within 2·sampleStale) did, because the loss the report
// counts was lost between the two: a loss-based flow that overflowed the
// queue has halved and drained it by the time the report comes.
//
// The round trip counts a queue in either direction, and one the lane's
// own traffic did not build; the adapter never takes the protection a
// clear path needed below that for it (fec.Adapter.SetPath).
func (d *pathDelay) state(now time.Time, echo bool) fec.PathState {
	st, _ := d.verdict(now, now, echo)
	return st
}

// verdict is state for a report that arrived at arrived, and the send
// time the losses it counts end at (judgeDense).
func (d *pathDelay) verdict(now, arrived time.Time, echo bool) (st fec.PathState, to time.Time) {
	if !echo || d.n == 0 || now.Sub(d.lastAt) > sampleStale || d.n < 2 && d.hs == 0 {
		return fec.PathUnknown, time.Time{}
	}
	base := d.base()
	over := max(base/2, queueMin)
	to = arrived.Add(-base)
	if st, ok := d.judgeDense(to, base+over); ok {
		return st, to
	}
	recent := d.before > 0 && now.Sub(d.beforeAt) <= 2*sampleStale
	switch {
	case d.last-base > over:
		return fec.PathQueued, to
	case recent && d.before-base > over:
		return fec.PathDrained, to
	}
	return fec.PathClear, to
}

// base is the path's least round trip: of the recent slots, or of its
// handshakes if smaller.
func (d *pathDelay) base() time.Duration {
	if b := d.least(); d.hs == 0 || b > 0 && b < d.hs {
		return b
	}
	return d.hs
}
