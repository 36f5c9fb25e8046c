// Package crypto holds everything a yip-router datagram needs to be sealed,
// recognised and opened: Curve25519 keys in WireGuard's text form, the Noise
// IKpsk2 handshake with its wire obfuscation and DoS cookies, the per-lane key
// schedule, the AEAD lane state with its replay window, and the data datagram
// framing (SipHash tag and header protection).
//
// It imports nothing else of the project, so shards and the router can share
// one codec without import cycles, and so the wire format can be tested and
// fuzzed in isolation.
package crypto
