package shard

import (
	crand "crypto/rand"
	"math/rand/v2"

	"github.com/yip-router/yip-router/crypto"
)

// Padding stretches the datagrams a shard sends (data, parity and control)
// by random amounts (crypto's padded frames), so that a datagram's length
// no longer says what it carries: without it a data datagram is its inner
// packet + 40 bytes and a parity datagram 2 bytes longer than its group's
// longest, and one bulk TCP flow puts almost every datagram at one length.
// Only peers whose keepalives announce FeatureFramePad get padded
// datagrams (older routers refuse them).
//
// A pad is drawn per socket batch and kind, not per datagram: datagrams of
// one kind and length that leave in one sendmmsg stay of one length, so UDP
// GSO still sends them as one superpacket (and the peer's GRO still merges
// them), while parity, drawn apart from the data beside it, is no longer
// exactly 2 bytes longer than its group's longest datagram.
type Padding struct {
	Mode PadMode
	// MaxWire is the longest datagram PadFull pads to: the MTU's
	// budget, the inner MTU + crypto.DataOverhead + crypto.PadHeadroom (+ the
	// 2 bytes of a parity symbol's length prefix).
	MaxWire int
}

// PadMode says how much a shard pads.
type PadMode uint8

const (
	// PadOff sends datagrams at their own length.
	PadOff PadMode = iota
	// PadLight adds MinPad..crypto.PadHeadroom bytes to every datagram: about
	// 17 bytes each, plus the crypto.PadHeadroom the inner MTU gives up.
	PadLight
	// PadFull pads every datagram to a length drawn uniformly between
	// its own + MinPad and MaxWire: small packets (TCP ACKs, keepalives)
	// then look like any other, at the cost of roughly doubling what
	// small-packet traffic sends.
	PadFull
)

func (m PadMode) String() string {
	switch m {
	case PadLight:
		return "light"
	case PadFull:
		return "full"
	}
	return "off"
}

// padFor returns the Pad for a datagram of kind k and wire length n
// (unpadded) on conn c to top's peer, and writes the junk after the symbol
// into buf (buf[end:end+Pad-2]). 0: unpadded.
func (s *Shard) padFor(top *lane, c int, k crypto.Kind, buf []byte, end, n int) uint16 {
	if s.cfg.Padding.Mode == PadOff || top.peerFeatures&FeatureFramePad == 0 {
		return 0
	}
	pad := s.pad(s.padDraw[c][k], n)
	// The buffer bounds the pad (never reached with the MTU's budget).
	if room := cap(buf) - end - crypto.TagLen; pad > room {
		if room < crypto.MinPad {
			return 0
		}
		pad = room
	}
	s.padRand.Read(buf[end : end+pad-2])
	return uint16(pad)
}

// pad is the pad a draw gives a datagram of wire length n.
func (s *Shard) pad(draw uint32, n int) int {
	return s.cfg.Padding.pad(draw, n)
}

// pad is the pad draw gives a datagram of wire length n (0 with PadOff).
func (p Padding) pad(draw uint32, n int) int {
	switch p.Mode {
	case PadLight:
		return crypto.MinPad + int(draw%(crypto.PadHeadroom-crypto.MinPad+1))
	case PadFull:
		span := max(p.MaxWire-n-crypto.MinPad+1, 1)
		return crypto.MinPad + int(draw%uint32(span))
	}
	return 0
}

// redrawPads draws conn c's pads for its next batch.
func (s *Shard) redrawPads(c int) {
	v := s.padRand.Uint64()
	s.padDraw[c] = [3]uint32{uint32(v), uint32(v >> 32), uint32(s.padRand.Uint64())}
}

// newPadRand seeds a shard's junk generator from the system's randomness:
// ChaCha8 fills junk at memory speed, where crypto/rand per datagram
// would be a syscall-backed read on the hot path.
func newPadRand() *rand.ChaCha8 {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (Go 1.24+)
	return rand.NewChaCha8(seed)
}
