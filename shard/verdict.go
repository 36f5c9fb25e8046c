package shard

// Verdict is what the handshake path (Config.Unmatched) made of a datagram
// no lane took. It decides how the shard counts the datagram and what it
// costs the rate of the socket it came on (readUnsteered): an answered
// handshake message one token, anything else also the bytes its mac1
// checks hashed, so a flood costs a shard a bounded share of its core
// whether it is junk or handshake messages that go unanswered.
type Verdict uint8

const (
	// NotHandshake: junk, or a peer's datagram that failed its tag;
	// counted as dropped (drop_unknown_lane, drop_bad_tag).
	NotHandshake Verdict = iota
	// Ignored: a handshake message the handshake path dropped without
	// an answer (a replayed initiation, one over the cookie replies'
	// cap or a proven address's rate, one refused; a response over its
	// rate or refused); it counts those.
	Ignored
	// Answered: a handshake message acted upon: an initiation answered,
	// met with a cookie reply, or crossing ours (authenticated; ours is
	// kept), a response that completed our handshake, a cookie reply to
	// ours.
	Answered
)
