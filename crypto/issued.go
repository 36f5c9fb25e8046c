package crypto

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/dchest/siphash"
)

// The addresses cookies were given to. A mac2 can be valid only for a
// source address:port whose cookie this responder handed out (in a cookie
// reply, CookieChecker.Cookie), in the cookie's slot or the one before:
// nobody else can compute one. So a handshake flood from spoofed sources,
// which never received a cookie, is refused by CheckMac2 after a lookup
// here instead of two BLAKE2s passes over each initiation (half of what
// such an initiation cost the responder).
//
// One Bloom filter per cookie slot, three kept (the current slot's, the
// previous one's, and the next one's, cleared when that slot begins): a
// false positive only costs the mac2 computation it would have cost
// anyway; there are no false negatives while a cookie is valid, since the
// filter of a slot is cleared only three slots later. The filters are
// made at the first cookie given (a router never under load holds none).

const (
	// issuedBits is each slot's filter size: at the cookie-reply cap
	// (2,000 a second to unknown sources, 240,000 a slot) with
	// issuedHashes bits each, about 0.4% false positives. 512 KiB a slot.
	issuedBits   = 1 << 22
	issuedHashes = 3
)

// issuedFilter is the per-slot filters. Safe for concurrent use: bits are
// set with atomic ORs, and a slot's filter is cleared under mu when its
// slot begins.
type issuedFilter struct {
	mu    sync.Mutex
	key   [2]uint64
	slots [3]issuedSlot
	ready atomic.Bool
}

type issuedSlot struct {
	slot atomic.Int64 // the cookie slot this filter holds; 0: none yet
	bits []atomic.Uint64
}

// init makes the filters at the first cookie given.
func (f *issuedFilter) init() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ready.Load() {
		return
	}
	f.key = randomSecret()
	for i := range f.slots {
		f.slots[i].bits = make([]atomic.Uint64, issuedBits/64)
	}
	f.ready.Store(true)
}

// positions are src's bits in a filter.
func (f *issuedFilter) positions(src netip.AddrPort) [issuedHashes]uint32 {
	var in [18]byte
	a := src.Addr().As16()
	copy(in[:16], a[:])
	binary.BigEndian.PutUint16(in[16:], src.Port())
	lo, hi := siphash.Hash128(f.key[0], f.key[1], in[:])
	return [issuedHashes]uint32{uint32(lo) % issuedBits, uint32(lo>>32) % issuedBits, uint32(hi) % issuedBits}
}

// add records that src was given a cookie of slot.
func (f *issuedFilter) add(src netip.AddrPort, slot int64) {
	if !f.ready.Load() {
		f.init()
	}
	s := &f.slots[(slot%3+3)%3]
	if s.slot.Load() != slot {
		f.mu.Lock()
		if s.slot.Load() != slot {
			for i := range s.bits {
				s.bits[i].Store(0)
			}
			s.slot.Store(slot)
		}
		f.mu.Unlock()
	}
	for _, p := range f.positions(src) {
		s.bits[p/64].Or(1 << (p % 64))
	}
}

// mayHave reports whether src may have been given a cookie of slot (false:
// certainly not).
func (f *issuedFilter) mayHave(src netip.AddrPort, slot int64) bool {
	if !f.ready.Load() {
		return false
	}
	s := &f.slots[(slot%3+3)%3]
	if s.slot.Load() != slot {
		return false
	}
	for _, p := range f.positions(src) {
		if s.bits[p/64].Load()&(1<<(p%64)) == 0 {
			return false
		}
	}
	return true
}
