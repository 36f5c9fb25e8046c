package shard

import "time"

// The sockets for datagrams no lane is steered for (Config.Strangers,
// Config.Known): handshakes, roaming peers' first datagrams and junk. Each
// is read after the lane sockets and the TUN queue, within a budget per
// loop iteration (readUnsteered) and a rate: StrangerRate tokens a
// second, strangerBurst at once after a quiet spell. Over its rate a
// queue is left alone, and left out of the loop's poll, until a few
// tokens are due, so a flood from strangers costs a shard a bounded share
// of its core whatever the attacker's rate (without the rate, a socket
// that is never empty kept the loop from ever sleeping: the receiving
// router's CPU over an unflooded flow's halved under a flood of spoofed
// initiations, docs/BENCHMARKS.md). The rest waits in, and overflows, the
// socket's small buffer.
//
// A datagram read costs one token; one that opens under a lane's keys (a
// lane the steering map has no room for, or not steered yet) none. On the
// strangers' socket, junk and handshake messages dropped unanswered
// (Verdict) cost one token more for every junkTokenBytes their mac1
// checks hashed (crypto.Mac1Covered times Config.HandshakeKeys), so the
// rate bounds the core's time, not a count: in a profile of the receiving
// router under a flood of random datagrams most of that time was the
// mac1 checks (BLAKE2s, 14% of its CPU, docs/BENCHMARKS.md), and a
// 1,600-byte datagram checked under 8 PSK forms costs 25 times what a
// short one does. The known socket charges one token a datagram whatever
// it is: its senders must spoof a peer's address, and its rate is there
// to keep that peer's handshake likely to be read (a priced queue would
// read a fraction of its datagrams under long junk).
//
// A legitimate burst fits under the rate: a core answers a few thousand
// handshakes a second (bench-scale), a rate of StrangerRate leaves room
// for the cookie round trip each costs under load. Peers' known addresses
// come on the known socket, with a queue and a rate of their own, so a
// flood from spoofed sources does not starve a peer that restarts behind
// its known address.
//
// Within an iteration of the loop each socket is read after the lane
// sockets and the TUN queue, its datagrams priced at their length plus
// strangerPrice (the fixed cost of looking one up and classifying it);
// reading stops once strangerBytes are spent or strangerTime has passed
// since the iteration began; in an iteration that found lane work
// (lane sockets, TUN, mesh) the budget is strangerBusyBytes. So a flood
// from strangers delays lane traffic by at most this much per iteration.
const (
	// StrangerRate is exported for the metrics' help text.
	StrangerRate  = 16000
	strangerBurst = 256
	// strangerResume: a queue over its rate waits until this many tokens
	// are due, so a busy shard reads it in batches, not one datagram per
	// system call.
	strangerResume = strangerBatch / 2

	// junkTokenBytes: the bytes of junk hashed that cost as much as a
	// datagram's fixed cost (its read, lookups, lane trials and
	// classification): about 1.6 µs each on the benchmark machine, where
	// a keyed BLAKE2s takes 3.1 ns a byte (crypto.BenchmarkClassifyGarbage).
	junkTokenBytes = 512

	strangerBatch     = 16
	strangerBytes     = 32 << 10
	strangerBusyBytes = 8 << 10
	strangerPrice     = 512
	strangerTime      = 200 * time.Microsecond
	// strangerRecheck: after a read of such a socket found nothing, a
	// busy loop looks again only this much later (a poll that sleeps
	// wakes on it anyway), so a shard carrying lane traffic does not pay
	// an empty recvmmsg per iteration; a handshake waits at most this
	// much longer.
	strangerRecheck = 200 * time.Microsecond
)

// unsteeredQueue is one such socket with its rate and its quiet time.
type unsteeredQueue struct {
	sock Socket
	in   Counter // what its datagrams count as (StrangersIn, KnownIn)
	// quiet: the socket was found empty, or is over its rate (capped); it
	// is read again from this time on.
	quiet  time.Time
	capped bool
	// hashed: what its datagrams' hashing costs counts (the strangers').
	hashed bool
	tokens float64   // tokens left: a datagram costs one, or more (price)
	fill   time.Time // when tokens were last topped up (zero: full)
}

// allow tops q's tokens up to now and says how many datagrams q may read
// now; none over its rate, and then q is capped and quiet until
// strangerResume tokens are due.
func (q *unsteeredQueue) allow(now time.Time) int {
	if q.fill.IsZero() {
		q.tokens = strangerBurst
	} else {
		q.tokens = min(strangerBurst, q.tokens+now.Sub(q.fill).Seconds()*StrangerRate)
	}
	q.fill = now
	if q.tokens < 1 {
		q.capped = true
		q.quiet = now.Add(time.Duration((strangerResume - q.tokens) / StrangerRate * float64(time.Second)))
		return 0
	}
	q.capped = false
	return int(q.tokens)
}

// took charges tokens spent (price) to q.
func (q *unsteeredQueue) took(spent float64) { q.tokens -= spent }

// price is the tokens n datagrams read cost, of which junk bytes were
// hashed keys times over before they proved to be junk.
func price(n int, junk uint64, keys int) float64 {
	return float64(n) + float64(junk)*float64(keys)/junkTokenBytes
}

// polled says whether the loop's poll at now should wake on q's socket:
// not while it is over its rate.
func (q *unsteeredQueue) polled(now time.Time) bool {
	return q.sock != nil && !(q.capped && now.Before(q.quiet))
}

// handshakeKeys is Config.HandshakeKeys, or one.
func (s *Shard) handshakeKeys() int {
	if s.cfg.HandshakeKeys == nil {
		return 1
	}
	return s.cfg.HandshakeKeys()
}
