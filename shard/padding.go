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
// Only peers whose keepalives announced FeatureFramePad get padded
// datagrams (lane.padded): older routers fail a padded datagram's tag
// (its Pad field is masked), so it is lost to them.
//
// Pads are drawn afresh for every run of up to padRunLen data datagrams of
// one length (padFor), and for every parity and control datagram, so
// parity is no longer exactly 2 bytes longer than its group's longest
// datagram, and no length stands out by more than chance.
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

// padRunLen is how many data datagrams of one length to one lane, in a
// row on one socket batch, share a pad: UDP GSO sends such a run as one
// superpacket (and the peer's GRO merges it), where a pad per datagram
// made the kernel handle every datagram alone and halved one TCP flow's
// goodput; runs of 8 keep most of that, while a bulk flow's lengths still
// spread evenly (a run is a few datagrams, not a batch of 64).
const padRunLen = 8

// padRun is a socket's current run of data datagrams sharing a pad.
type padRun struct {
	ln   *lane
	n    int // unpadded wire length
	pad  uint16
	left int // datagrams the run may still take
}

// padFor returns the Pad for a data (parity: !data) datagram of wire
// length n (unpadded) to top's peer on conn c, and writes the junk after
// the symbol into buf (buf[end:end+Pad-2]). 0: unpadded. Data datagrams
// share pads in runs (padRunLen); parity draws its own, so it is not its
// group's longest datagram + 2.
func (s *Shard) padFor(top *lane, c int, data bool, buf []byte, end, n int) uint16 {
	if s.cfg.Padding.Mode == PadOff || !top.padded() {
		return 0
	}
	if !data {
		return s.padFrame(buf, end, n, 0)
	}
	r := &s.padRuns[c]
	if r.left > 0 && r.ln == top && r.n == n {
		r.left--
		return s.padFrame(buf, end, n, r.pad)
	}
	pad := s.padFrame(buf, end, n, 0)
	*r = padRun{ln: top, n: n, pad: pad, left: padRunLen - 1}
	return pad
}

// padFrame draws the Pad for a datagram of wire length n (or takes pad,
// if not 0) and writes its junk into buf[end:end+Pad-2]; 0 if buf has no
// room.
func (s *Shard) padFrame(buf []byte, end, n int, pad uint16) uint16 {
	if pad == 0 {
		pad = uint16(s.cfg.Padding.pad(uint32(s.padRand.Uint64()), n))
	}
	// The buffer bounds the pad (never reached with the MTU's budget).
	if room := cap(buf) - end - crypto.TagLen; int(pad) > room {
		if room < crypto.MinPad {
			return 0
		}
		pad = uint16(room)
	}
	s.padRand.Read(buf[end : end+int(pad)-2])
	return pad
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

// padded reports whether ln's data and parity may be padded: the peer
// announced FeatureFramePad, in this session or (carried over a rekey) the
// one before. Control frames need it said in this session (heardPeer,
// sendControl): a peer restarted as an older router fails a padded
// datagram's tag, and only an unpadded hello lets it confirm the session
// and say what it reads.
func (ln *lane) padded() bool {
	return ln.peerFeatures&FeatureFramePad != 0
}

// maxInner is the longest inner packet this router's TUN MTU lets in
// (MaxWire less the padding headroom, the parity prefix and the framing),
// or 0 when unknown (tests).
func (p Padding) maxInner() int {
	if p.MaxWire == 0 {
		return 0
	}
	return p.MaxWire - crypto.PadHeadroom - 2 - crypto.DataOverhead
}

// newPadRand seeds a shard's junk generator from the system's randomness:
// ChaCha8 fills junk at memory speed, where crypto/rand per datagram
// would be a syscall-backed read on the hot path.
func newPadRand() *rand.ChaCha8 {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (Go 1.24+)
	return rand.NewChaCha8(seed)
}
