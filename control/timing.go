package control

import "time"

// Every control-plane timing constant and rate. Rekey and handshake
// timeout are WireGuard's values; a session is rejected after 3 × the
// rekey interval (360 s; WireGuard: 180 s), so a responder whose initiator
// went quiet keeps the session while it re-initiates itself (at 1.25 ×
// rekey). The lanes' own timers (keepalives, loss reports, liveness) are in
// shard/timing.go.
const (
	// DefaultRekeyAfter is when the initiator of a session starts a new
	// handshake.
	DefaultRekeyAfter = 120 * time.Second
	// rejectAfterFactor × rekey is when a session that was not renewed
	// is torn down.
	rejectAfterFactor = 3
	// responderRekeyDiv: a responder whose initiator did not rekey
	// initiates itself at rekey × (1 + 1/responderRekeyDiv).
	responderRekeyDiv = 4
	// rekeyJitterDiv: a session's rekey comes up to rekey/rekeyJitterDiv
	// late, so rekeys recur at no fixed period.
	rekeyJitterDiv = 10
	// HandshakeTimeout is how long an initiation waits for its response.
	HandshakeTimeout = 5 * time.Second
	// TimerPeriod is how often Tick should run.
	TimerPeriod = 250 * time.Millisecond
	// Retry backoff: retryFirst doubling per attempt up to retryMax,
	// ±retryJitterDiv⁻¹ of it at random.
	retryFirst = time.Second
	// failWarnAttempts: the initiation that follows this many unanswered
	// ones (about 15 s of retries) logs one WARN that the peer's
	// handshakes keep failing; the next completed handshake logs that
	// they work again.
	failWarnAttempts = 4
	retryMax         = 15 * time.Second
	// sessionRetries: while a session lives, an unanswered initiation is
	// retried this many times in all (the backoff's 1, 2, 4, 8, then 15 s:
	// about 90 s, as long as WireGuard tries a handshake).
	sessionRetries = 9
	retryJitterDiv = 10
	// rttMax: a response later than this after its initiation says
	// nothing about the path (it waited in a queue, or answered a retry's
	// predecessor): the lanes get no round trip from it.
	rttMax = 2 * time.Second
	// wantTimeout: traffic that waited this long for a session no longer
	// starts handshakes.
	wantTimeout = 90 * time.Second

	// eventQueueCap bounds the shards' lane events waiting for the
	// control loop (queue.go). The loop takes them as they come, so the
	// queue fills only while it is busy (a step that initiates to
	// thousands of peers spends about 0.1 ms of DH on each): 4096 holds a
	// second of NoSession from a thousand peers on four shards. Past it
	// the events their shards repeat are dropped. Its two buffers (one
	// filling, one being applied) grow only as far as a burst takes
	// them: at most 4096 events of about 100 bytes each.
	eventQueueCap = 4096

	// cookieThreshold: initiations per second above which the responder
	// demands cookies (each costs ~72 µs of DH: 500/s is ~4% of a core).
	cookieThreshold = 500
	// refusedThreshold: initiations per second that cost a DH and were
	// refused (an unknown key, a stale timestamp) after which the
	// responder demands cookies for the rest of the second: a flood of
	// spoofed initiations then costs a handful of DHs a second, not
	// cookieThreshold (docs/BENCHMARKS.md).
	refusedThreshold = 16
	// cookieReplyCap: cookie replies per second, router-wide, to sources
	// that are no peer's known address. Under a flood of spoofed
	// initiations every reply costs the receiving data shard a seal and a
	// sendto; past the cap such sources get silence (a real initiator
	// from an unknown address retries on its schedule). Known addresses
	// always get theirs.
	cookieReplyCap = 2000

	// Per-source limits on initiations (each costs the responder a DH):
	// a token bucket per source prefix, initRate per second up to
	// initBurst, in a table of at most limiterLimit prefixes.
	initRate     = 20.0
	initBurst    = 5.0
	limiterLimit = 8192
	// Reads of responses per pending initiation (each read that fails
	// costs four X25519: two in the read, two to rebuild the state).
	respRate  = 4
	respBurst = 8.0
)
