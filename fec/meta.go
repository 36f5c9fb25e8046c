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
	// MaxK bounds data symbols per group; one uint64 bitmap tracks delivery.
	MaxK = 64
	// MaxR bounds parity symbols per group; MaxK+MaxR fits the uint8 Index.
	MaxR = 32

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
