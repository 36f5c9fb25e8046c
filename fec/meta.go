package fec

import "errors"

// Kind tells data symbols from parity symbols. The numeric values match the
// framing header's kind field so the framing layer can convert with a cast;
// its third kind (control) never reaches this package.
type Kind uint8

const (
	KindData   Kind = 0
	KindParity Kind = 1
)

// Limits. They bound every per-lane array so that a hostile Meta can never
// index or size anything the package did not preallocate.
const (
	// MaxSymbolLen is the largest data symbol accepted: an inner packet of a
	// 1500-byte MTU plus the 8-byte AEAD counter and 16-byte tag fits with
	// room to spare, and the slack keeps parity (2+longest) well below 64 KiB
	// so the 2-byte length prefix can never overflow.
	MaxSymbolLen = 1600
	// MaxParityLen is the largest parity symbol: the length prefix plus the
	// longest data symbol of its group.
	MaxParityLen = lenPrefix + MaxSymbolLen
	// MaxK bounds data symbols per group and MaxR parity symbols: every
	// index of a group (data 0..K-1, parity K..K+R-1) fits the uint8
	// Index, and the coding matrix needs MaxK+MaxR distinct elements of
	// GF(2^8) (codec.go). A long group pays less parity for the same
	// residual loss (192 data symbols need 28 parity at 5% random loss
	// where 64 need 15: 12.7% of the datagrams, not 19%).
	MaxK = 192
	MaxR = 63
	// LegacyMaxK and LegacyMaxR are the largest group a decoder before
	// long groups takes: a sender stays within them for a peer that does
	// not announce it reads long groups (the shard's FeatureLongGroups).
	// The coding matrix of such a group is the one those decoders use.
	LegacyMaxK = 64
	LegacyMaxR = 32

	lenPrefix = 2
	slabLen   = MaxParityLen
)

// Meta is what the framing header carries for a data or parity symbol.
//
// K and R on a data symbol are the ratio in force when it was sent; the group
// may still end early (flush), and then only its parity symbols know the
// actual, smaller K. The decoder trusts parity for K and uses the data
// symbols' K only as an upper bound.
type Meta struct {
	Kind  Kind
	Group uint32 // wraps; compared with serial-number arithmetic
	Index uint8  // data 0..K-1, parity K..K+R-1
	K, R  uint8
}

var (
	ErrSymbolLen = errors.New("fec: symbol length out of range")
	ErrRatio     = errors.New("fec: K:R out of range")
)

// validRatio reports whether k:r is something the codec will accept. R may be
// zero (no parity: "fec = off" still numbers symbols), K may not.
func validRatio(k, r int) bool {
	return k >= 1 && k <= MaxK && r >= 0 && r <= MaxR
}

// FitRatio is k:r within what the peer's decoder reads: as it is for a peer
// that reads long groups, else cut to LegacyMaxK:LegacyMaxR.
func FitRatio(k, r int, long bool) (int, int) {
	if long {
		return k, r
	}
	return min(k, LegacyMaxK), min(r, LegacyMaxR)
}
