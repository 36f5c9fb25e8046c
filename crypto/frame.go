package crypto

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dchest/siphash"
)

// Data datagram layout (all of it looks random to an observer):
//
//	masked header (8) ‖ symbol (1..) ‖ tag (8)
//	masked header (8) ‖ symbol (1..) ‖ junk (Pad-2) ‖ masked Pad (2) ‖ tag (8)
//
// The second form is a padded datagram (bit 2 of byte 0): Pad bytes of
// random junk and its own length stretch it, so its length tells less
// about what it carries. A router before padding does not unmask the Pad
// field, so the tag fails there and the datagram is lost: a sender pads
// only for a peer that announced it reads padding.
//
// header (before masking):
//
//	byte 0    kind in bits 0-1 (data, parity, control); bit 2 padded;
//	          bits 3-7 zero
//	bytes 1-4 FEC group id, big endian, wrapping
//	byte 5    symbol index in the group (data 0..K-1, parity K..K+R-1)
//	byte 6    K, data symbols of the group
//	byte 7    R, parity symbols of the group
//
// The tag is SipHash-2-4 under the lane's tag key over a fixed-size digest
// of the datagram, not over every byte: the unmasked header, the symbol's
// length and the Pad (0 when unpadded), the symbol's first 24 bytes (the
// ones the mask covers: a data symbol's AEAD counter) and its last 16 (a
// data or control symbol's Poly1305 tag); a symbol of 40 bytes or less is
// covered whole. That is at most 54 bytes whatever the datagram's length,
// so the tag costs the same for a 64-byte ACK and a 64 KiB stray. The
// payload between needs no second MAC: the AEAD authenticates a data or
// control symbol, so a payload changed on the path fails its open and is
// lost like a dropped datagram (the FEC decoder then treats it as an
// erasure), and a changed parity symbol can only make a reconstruction fail
// its open. The junk of a padded datagram is not covered; it carries
// nothing. Off the path nothing changes: without the tag key no datagram
// passes, and flipping any covered bit fails it.
//
// The mask is SipHash-128 under the lane's header-protection key of
// the tag, XORed over the first 32 bytes (header and the first 24 bytes of
// the symbol), because those are the bytes with structure: the header, the
// AEAD counter at the start of a data symbol, and the length prefixes and
// counters that RS parity (being linear) carries into parity symbols. A
// padded datagram's Pad field, the one other structured field, is masked
// the same way by a third SipHash block of the tag. Both masks are XORs
// that do not depend on the bytes they cover, so they may overlap; only
// the padded bit must be read after the first mask is removed.
//
// WireVersion names this framing. Routers of different wire versions do
// not interoperate (their handshakes complete, their datagrams fail each
// other's tags); version 2 is the constant-cost tag above, version 1
// tagged every byte.
const (
	HeaderLen = 8
	TagLen    = 8
	// FrameOverhead is what framing adds to a symbol.
	FrameOverhead = HeaderLen + TagLen
	// MaskLen is how many leading bytes header protection covers.
	MaskLen = 32
	// CounterLen is the AEAD counter that starts every data/control symbol.
	CounterLen = 8
	// SymbolOverhead is what sealing adds to a packet to make a data symbol.
	SymbolOverhead = CounterLen + AEADOverhead
	// DataOverhead is the total per-datagram overhead of a data packet.
	DataOverhead = FrameOverhead + SymbolOverhead
	// MinPad and MaxPad bound a padded datagram's Pad (junk and its
	// 2-byte length).
	MinPad = 2
	MaxPad = 0xffff
	// PadHeadroom is what padding takes from the inner MTU: a datagram
	// of the largest inner packet, padded by up to PadHeadroom bytes,
	// still fits the underlay the MTU was chosen for.
	PadHeadroom = 32

	// WireVersion is the framing's version (see above).
	WireVersion = 2

	kindBits   = 3
	flagPadded = 1 << 2

	// The tag's digest (tagInput): header, symbol length (4), Pad (2),
	// then up to tagHead leading and tagTail trailing symbol bytes.
	tagHead     = MaskLen - HeaderLen
	tagTail     = AEADOverhead
	tagLenField = 6
	tagInputMax = HeaderLen + tagLenField + tagHead + tagTail
)

// Kind says what a symbol is. It travels only inside the masked header.
type Kind uint8

// The symbol kinds.
const (
	KindData    Kind = 0 // a sealed inner packet, FEC data symbol
	KindParity  Kind = 1 // an RS parity symbol
	KindControl Kind = 2 // a sealed control frame, outside FEC
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindParity:
		return "parity"
	case KindControl:
		return "control"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header is the FEC and type information of one datagram.
type Header struct {
	Kind  Kind
	Group uint32
	Index uint8
	K, R  uint8
	// Pad is 0, or MinPad..MaxPad: the datagram is padded by that many
	// bytes after its symbol.
	Pad uint16
}

var (
	// ErrShort means the datagram cannot hold header, a symbol and a tag.
	ErrShort = errors.New("crypto: datagram too short")
	// ErrTag means the datagram's tag does not verify under this lane's key.
	ErrTag = errors.New("crypto: datagram tag mismatch")
	// ErrHeader means an authenticated header has an invalid field: the
	// peer is broken (a third party cannot produce it).
	ErrHeader = errors.New("crypto: invalid datagram header")
)

// Framer tags, masks and checks datagrams for one direction of one lane.
// The SipHash keys are kept as the two 64-bit words SipHash consumes, so the
// per-packet cost is the hash alone.
type Framer struct {
	t0, t1 uint64 // tag key
	h0, h1 uint64 // header-protection key
}

// NewFramer returns a framer for the lane keys' tag and HP keys.
func NewFramer(k *LaneKeys) Framer {
	return Framer{
		t0: binary.LittleEndian.Uint64(k.Tag[0:8]),
		t1: binary.LittleEndian.Uint64(k.Tag[8:16]),
		h0: binary.LittleEndian.Uint64(k.HP[0:8]),
		h1: binary.LittleEndian.Uint64(k.HP[8:16]),
	}
}

// Frame turns buf[HeaderLen:HeaderLen+symLen] (the symbol, already written
// there) into a datagram: it writes and masks the header and appends the tag.
// With h.Pad (MinPad or more) the caller has also written h.Pad-2 bytes of
// random junk after the symbol, and Frame adds the length. buf must have
// capacity for HeaderLen+symLen+h.Pad+TagLen; the result aliases buf.
func (f *Framer) Frame(buf []byte, h Header, symLen int) []byte {
	n := HeaderLen + symLen + int(h.Pad)
	buf = buf[:n+TagLen]
	f.header(buf, h, n)
	tag := f.tag(buf[:n], symLen, int(h.Pad))
	binary.LittleEndian.PutUint64(buf[n:], tag)
	f.mask(buf[:n], tag)
	return buf
}

// header writes h, unmasked, into buf (a datagram of n bytes before its
// tag), with the Pad field at its end when h.Pad is set.
func (f *Framer) header(buf []byte, h Header, n int) {
	buf[0] = byte(h.Kind & kindBits)
	if h.Pad != 0 {
		buf[0] |= flagPadded
		binary.LittleEndian.PutUint16(buf[n-2:], h.Pad)
	}
	binary.BigEndian.PutUint32(buf[1:5], h.Group)
	buf[5] = h.Index
	buf[6] = h.K
	buf[7] = h.R
}

// Deframe verifies the tag of dgram and, only if it matches, unmasks the
// header in place and returns it with the symbol (aliasing dgram) and the
// padding stripped. On ErrTag and ErrShort dgram is left exactly as it
// was, so the caller may try another key (e.g. the previous session's
// during a rekey); ErrHeader (an authenticated datagram with an invalid
// kind: a broken peer) leaves it unmasked. A Pad field that leaves no
// symbol cannot be authenticated (the tag covers the symbol it delimits),
// so it is ErrTag.
func (f *Framer) Deframe(dgram []byte) (Header, []byte, error) {
	if len(dgram) < FrameOverhead+1 {
		return Header{}, nil, ErrShort
	}
	n := len(dgram) - TagLen
	tag := binary.LittleEndian.Uint64(dgram[n:])
	symLen, pad, ok := f.unmask(dgram[:n], tag)
	if !ok {
		return Header{}, nil, ErrTag
	}
	h := Header{
		Kind:  Kind(dgram[0] &^ flagPadded),
		Group: binary.BigEndian.Uint32(dgram[1:5]),
		Index: dgram[5],
		K:     dgram[6],
		R:     dgram[7],
		Pad:   uint16(pad),
	}
	if h.Kind > KindControl {
		return h, nil, ErrHeader
	}
	return h, dgram[HeaderLen : HeaderLen+symLen], nil
}

// unmask removes the masks from b (a datagram without its tag) and reports
// whether the tag verifies, with the symbol's length and the Pad; if not,
// b is restored with the same mask words, so a rejected datagram costs two
// SipHash-128 blocks for the masks (a third for a Pad mask) and one SipHash
// over at most tagInputMax bytes. Bit 2 of the unmasked first byte says
// whether a Pad field is masked too; under a wrong key that bit is random
// and the tag fails either way.
func (f *Framer) unmask(b []byte, tag uint64) (symLen, pad int, ok bool) {
	m := f.unmaskHeader(b, tag)
	symLen, pad, ok = layout(b)
	// A single 64-bit compare is constant time; nothing is learned from
	// where the mismatch is.
	if ok && f.tag(b, symLen, pad) == tag {
		return symLen, pad, true
	}
	m.undo(b)
	return 0, 0, false
}

// unmaskHeader removes header protection from b (a masked datagram without
// its tag) as tag derives it — the Pad field's mask too when the unmasked
// first byte says padded — and returns the masks, so undo can put them
// back without hashing again.
func (f *Framer) unmaskHeader(b []byte, tag uint64) hpMasks {
	m := f.masks(tag, len(b))
	m.apply(b)
	if isPadded(b) {
		m.pad, m.padded = f.padMask(tag), true
		m.applyPad(b)
	}
	return m
}

// layout splits b, an unmasked datagram without its tag, into the symbol's
// length and the Pad; ok is false when b says it is padded but its Pad
// field is below MinPad or leaves no byte of symbol.
func layout(b []byte) (symLen, pad int, ok bool) {
	symLen = len(b) - HeaderLen
	if b[0]&flagPadded == 0 {
		return symLen, 0, true
	}
	if !isPadded(b) {
		return 0, 0, false
	}
	pad = int(binary.LittleEndian.Uint16(b[len(b)-2:]))
	if pad < MinPad || pad > symLen-1 {
		return 0, 0, false
	}
	return symLen - pad, pad, true
}

// tag is the datagram tag of b (unmasked header ‖ symbol ‖ padding, no
// tag) whose symbol is symLen bytes, padded by pad: SipHash-2-4 of the
// digest the package doc describes, assembled on the stack so it costs
// the same at any length and allocates nothing.
func (f *Framer) tag(b []byte, symLen, pad int) uint64 {
	var in [tagInputMax]byte
	copy(in[:HeaderLen], b)
	binary.LittleEndian.PutUint32(in[HeaderLen:], uint32(symLen))
	binary.LittleEndian.PutUint16(in[HeaderLen+4:], uint16(pad))
	sym := b[HeaderLen : HeaderLen+symLen]
	n := HeaderLen + tagLenField
	n += copy(in[n:], sym[:min(symLen, tagHead)])
	if symLen > tagHead {
		n += copy(in[n:], sym[max(tagHead, symLen-tagTail):])
	}
	return siphash.Hash(f.t0, f.t1, in[:n])
}

// Matches reports whether dgram's tag verifies under f, leaving dgram
// exactly as it was: for a shard that only finds out which other shard
// owns a datagram's lane and hands it over still framed.
func (f *Framer) Matches(dgram []byte) bool {
	if len(dgram) < FrameOverhead+1 {
		return false
	}
	n := len(dgram) - TagLen
	tag := binary.LittleEndian.Uint64(dgram[n:])
	if _, _, ok := f.unmask(dgram[:n], tag); !ok {
		return false
	}
	f.mask(dgram[:n], tag)
	return true
}

// isPadded reports whether b, an unmasked datagram without its tag, says
// it has a Pad field and is long enough to hold one.
func isPadded(b []byte) bool {
	return b[0]&flagPadded != 0 && len(b) >= HeaderLen+MinPad
}

// mask applies header protection to b, an unmasked datagram without its
// tag: the Pad field's mask first (it is found by the unmasked first
// byte), then the mask over the first MaskLen bytes. Both are XORs, so
// mask also undoes itself.
func (f *Framer) mask(b []byte, tag uint64) {
	m := f.masks(tag, len(b))
	if isPadded(b) {
		m.pad, m.padded = f.padMask(tag), true
		m.applyPad(b)
	}
	m.apply(b)
}

// hpMasks are the header-protection mask words of one tag: w over the
// first MaskLen bytes, pad (when non-zero) over the Pad field, the last two
// bytes. Kept so that restoring a rejected datagram hashes nothing again.
type hpMasks struct {
	w      [4]uint64
	n      int // how many bytes of w apply: min(len, MaskLen)
	pad    uint16
	padded bool // pad applies
}

// masks derives the mask words for an n-byte datagram (without its tag)
// from its tag: SipHash-128 under the header-protection key, one block per
// 16 bytes masked.
func (f *Framer) masks(tag uint64, n int) hpMasks {
	var in [9]byte
	binary.LittleEndian.PutUint64(in[:8], tag)
	m := hpMasks{n: min(n, MaskLen)}
	m.w[0], m.w[1] = siphash.Hash128(f.h0, f.h1, in[:])
	if n > 16 {
		in[8] = 1
		m.w[2], m.w[3] = siphash.Hash128(f.h0, f.h1, in[:])
	}
	return m
}

// padMask derives the Pad field's mask from the tag (a third block).
func (f *Framer) padMask(tag uint64) uint16 {
	var in [9]byte
	binary.LittleEndian.PutUint64(in[:8], tag)
	in[8] = 2
	return uint16(siphash.Hash(f.h0, f.h1, in[:]))
}

// apply XORs the mask words over the first bytes of b.
func (m *hpMasks) apply(b []byte) {
	for i := 0; i < m.n; i += 8 {
		xor64(b, i, m.w[i/8])
	}
}

// undo puts back what unmaskHeader removed.
func (m *hpMasks) undo(b []byte) {
	m.applyPad(b)
	m.apply(b)
}

// applyPad XORs the Pad mask over the last two bytes of b, if it has one.
func (m *hpMasks) applyPad(b []byte) {
	if !m.padded {
		return
	}
	b[len(b)-2] ^= byte(m.pad)
	b[len(b)-1] ^= byte(m.pad >> 8)
}

// xor64 XORs the little-endian bytes of v into b[off:off+8], clipped to b.
func xor64(b []byte, off int, v uint64) {
	if off+8 <= len(b) {
		binary.LittleEndian.PutUint64(b[off:], binary.LittleEndian.Uint64(b[off:])^v)
		return
	}
	for i := off; i < len(b); i++ {
		b[i] ^= byte(v)
		v >>= 8
	}
}

// SealSymbol seals plaintext into a data or control symbol: counter ‖
// ciphertext, written at dst[0:]. plaintext may already sit at
// dst[CounterLen:] (in-place sealing, the zero-copy egress path). ad is the
// associated data (callers separate data from control with it).
func (s *Sealer) SealSymbol(dst, ad, plaintext []byte) ([]byte, error) {
	if cap(dst) < CounterLen+len(plaintext)+AEADOverhead {
		return nil, ErrShort
	}
	dst = dst[:CounterLen]
	out, c, err := s.Seal(dst[CounterLen:CounterLen], ad, plaintext)
	if err != nil {
		return nil, err
	}
	binary.LittleEndian.PutUint64(dst[:CounterLen], c)
	return dst[:CounterLen+len(out)], nil
}

// SymbolCounter returns the AEAD counter of a data or control symbol.
func SymbolCounter(sym []byte) (uint64, bool) {
	if len(sym) < SymbolOverhead {
		return 0, false
	}
	return binary.LittleEndian.Uint64(sym[:CounterLen]), true
}

// OpenSymbol opens a symbol made by SealSymbol, decrypting in place; the
// plaintext aliases sym[CounterLen:].
func (o *Opener) OpenSymbol(ad, sym []byte) ([]byte, error) {
	c, ok := SymbolCounter(sym)
	if !ok {
		return nil, ErrShort
	}
	body := sym[CounterLen:]
	return o.Open(body[:0], c, ad, body)
}
