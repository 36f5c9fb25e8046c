package crypto

import (
	"encoding/binary"

	"github.com/dchest/siphash"
)

// Wire version 1 tagged every byte: SipHash-2-4 under the lane's tag key
// over the unmasked header, the symbol and any padding (junk and Pad
// field), with the same keys and the same header protection as version 2.
// A version 2 router never accepts such a datagram. It recognises one only
// to tell the operator that a peer runs the previous framing: that peer's
// handshakes complete (they did not change) and every datagram after them
// fails the tag, which alone looks like a dead or confused peer.

// MatchesV1 reports whether dgram verifies as wire version 1 framed it,
// leaving dgram exactly as it was. It hashes the whole datagram, so callers
// bound how often they ask (shard: a few times per lane).
func (f *Framer) MatchesV1(dgram []byte) bool {
	if len(dgram) < FrameOverhead+1 {
		return false
	}
	n := len(dgram) - TagLen
	b := dgram[:n]
	tag := binary.LittleEndian.Uint64(dgram[n:])
	m := f.unmaskHeader(b, tag)
	ok := siphash.Hash(f.t0, f.t1, b) == tag
	m.undo(b)
	return ok
}

// FrameV1 is Frame as wire version 1 did it (see MatchesV1): what a router
// of the previous version sends, for tests of the mismatch detection.
func (f *Framer) FrameV1(buf []byte, h Header, symLen int) []byte {
	n := HeaderLen + symLen + int(h.Pad)
	buf = buf[:n+TagLen]
	f.header(buf, h, n)
	tag := siphash.Hash(f.t0, f.t1, buf[:n])
	binary.LittleEndian.PutUint64(buf[n:], tag)
	f.mask(buf[:n], tag)
	return buf
}
