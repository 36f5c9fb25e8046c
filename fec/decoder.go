// The Decoder: its bounds, counters and per-group slots, and Push, which
// takes a symbol into its group and delivers data at once. Where a group
// sits in the window and how it leaves is in window.go; reconstruction and
// the symbol store in recovery.go.

package fec

import (
	"encoding/binary"
	"math"
	"math/bits"
	"time"
)

// Decoder defaults. A window of 32 groups (auto mode's run up to 240
// symbols each) tolerates several hundred packets of reordering, with 16
// groups to spare beyond the span an encoder's size classes keep between
// them (maxSpan); 1.25 MiB holds about 820 symbols, three of the largest
// blocks auto mode sends (272 symbols, the adapter's blockBudget; the
// oldest open group is evicted past it); 250 ms is far beyond any useful
// recovery (a recovered packet later than that is worse than a loss to TCP
// and to real-time traffic alike).
const (
	DefaultMaxGroups = 32
	DefaultMaxBytes  = 5 << 18
	DefaultGroupTTL  = 250 * time.Millisecond
	maxMaxGroups     = 1024
)

// DecoderConfig bounds one lane's decoder. Zero fields take the defaults.
type DecoderConfig struct {
	// MaxGroups is the window: groups older than the newest minus MaxGroups
	// are dropped. Rounded up to a power of two so group ids map to slots
	// consistently across the 2^32 wrap.
	MaxGroups int
	// MaxBytes caps symbol storage; when reached, the oldest open group is
	// evicted. The decoder's fixed overhead (slots, codecs) is outside it.
	MaxBytes int
	// GroupTTL frees a group's storage this long after its first symbol.
	GroupTTL time.Duration
	// MaxAhead is how many groups beyond the newest a symbol may jump; one
	// further ahead is dropped (unless the lane has been idle for GroupTTL,
	// which is how the window resynchronises after a long outage). The
	// window never resynchronises backwards: a group behind it is late or
	// replayed, however long the lane has been idle. Zero means MaxGroups.
	MaxAhead int
}

// Stats are cumulative counters, exposed as a plain struct so the router can
// copy them into its metrics without locking (call Stats from the lane's
// goroutine).
type Stats struct {
	DataIn, ParityIn uint64 // symbols accepted into the window
	Delivered        uint64 // data symbols handed out as received
	Recovered        uint64 // data symbols handed out after reconstruction
	Rejected         uint64 // data symbols the deliverer refused (did not open, or replayed)
	Spoiled          uint64 // reconstructions that yielded a refused symbol (a changed parity symbol)
	Duplicates       uint64 // symbols already seen, or data already delivered
	Late             uint64 // symbols for groups behind the window
	FarAhead         uint64 // symbols for groups too far ahead of the window
	Invalid          uint64 // Meta or length impossible on its own
	Inconsistent     uint64 // symbols contradicting their group (group gives up recovery)
	Unrecoverable    uint64 // groups closed with data still missing
	LostData         uint64 // data symbols in those groups (lower bound without parity)
	Evicted          uint64 // open groups evicted to stay under MaxBytes
	Expired          uint64 // open groups whose GroupTTL passed
	NotStored        uint64 // symbols not kept for recovery because of the byte cap
	Resyncs          uint64 // window jumps after an idle period
}

type slotState uint8

const (
	stateFree    slotState = iota
	stateOpen              // collecting symbols, recovery possible
	stateDone              // all data delivered; only dedup bookkeeping left
	stateCorrupt           // inconsistent; pass-through only
	stateClosed            // expired or evicted with data missing
	// stateMissing: a group the window moved past without a symbol of it
	// (start is when): counted lost at its GroupTTL unless one arrives.
	stateMissing
)

// slot is one group in the window. It is fixed-size: the per-group variable
// part (symbol bytes) lives in the shared arena, referenced by index.
type slot struct {
	group     uint32
	state     slotState
	accounted bool
	// countedLost: the group was counted lost whole (stateMissing at its
	// TTL) before a symbol of it arrived; account adds nothing more.
	countedLost bool
	kKnown      bool // K and R come from a parity symbol
	k, r        uint8
	dataK       uint8 // largest K announced by a data symbol
	dataR       uint8
	maxIdx      uint8  // 1 + highest data index seen
	shardLen    uint16 // parity length once known
	// start is when the group's slot was made (monoNs; 0: never). Not a
	// time.Time, which holds a pointer: a slot without one leaves the
	// window's slots out of the garbage collector's scan, which a hub
	// with thousands of lanes pays at every cycle.
	start     int64
	present   indexSet // distinct indices received
	delivered indexSet // data indices handed out
	nStored   uint16
	// spoiled counts reconstructions whose output failed to open: a parity
	// symbol was changed on the path (see tryRecover).
	spoiled uint8
	lens    [MaxK]uint16 // payload length of stored data symbols
	// bufs is the arena slab holding each index, plus one: 0 is none,
	// so a new group's zeroed slot has none without a pass over it
	// (buf, setBuf).
	bufs [MaxK + MaxR]int16
}

// Decoder reassembles one lane. Not safe for concurrent use.
type Decoder struct {
	cfg   DecoderConfig
	mask  uint32
	slots []slot
	// due[i] is slots[i].start while the slot holds a group not yet
	// accounted for (0: free or accounted): Tick reads this small array,
	// not the slots (about 1 KiB each).
	due     []int64
	head    uint32
	started bool
	// first is the first group of the current run (start, or the last
	// resynchronisation): groups after it that never arrived are counted
	// lost (slotFor), those before it are not ours to count.
	first uint32
	// nextExpiry is when the oldest group not yet accounted for expires
	// (zero: none), so Tick has nothing to scan before then. A group
	// finishing early leaves it early, which only costs one scan.
	nextExpiry time.Time
	lastSeen   time.Time

	arena    [][]byte // slabs, grown lazily up to maxSlabs
	free     []int16
	maxSlabs int

	// er is the recovery's solver and scratch (tryRecover), made at the
	// first recovery and released by Trim: a lane that never recovers
	// does not carry it.
	er *erasures

	stats Stats
	loss  LossReport
}

// NewDecoder returns a decoder bounded by cfg.
func NewDecoder(cfg DecoderConfig) *Decoder {
	if cfg.MaxGroups <= 0 {
		cfg.MaxGroups = DefaultMaxGroups
	}
	cfg.MaxGroups = min(1<<bits.Len(uint(cfg.MaxGroups-1)), maxMaxGroups)
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.GroupTTL <= 0 {
		cfg.GroupTTL = DefaultGroupTTL
	}
	if cfg.MaxAhead <= 0 {
		cfg.MaxAhead = cfg.MaxGroups
	}
	// At least one full group must fit, or nothing could ever be recovered.
	// A slot stores a slab's index plus one in an int16 (slot.bufs).
	maxSlabs := min(max(cfg.MaxBytes/slabLen, MaxK+MaxR), math.MaxInt16-1)
	// The window's slots (about 1 KiB each) and the free list are made
	// at the first symbol (slotFor, takeSlab): a lane's keys that never
	// receive (a hub's many idle peers, keys replaced before use) carry
	// only this header.
	d := &Decoder{
		cfg:      cfg,
		mask:     uint32(cfg.MaxGroups - 1),
		maxSlabs: maxSlabs,
	}
	return d
}

// monoEpoch is the zero of the slots' start times (monoNs).
var monoEpoch = time.Now()

// monoNs is t as a slot's start: nanoseconds since monoEpoch (monotonic
// where t carries a monotonic reading), never 0, which says "never".
func monoNs(t time.Time) int64 {
	if ns := int64(t.Sub(monoEpoch)); ns != 0 {
		return ns
	}
	return 1
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }

// Head is the newest group in the window; ok is false until the first
// symbol arrives. A sender that continues after Head (or, once the lane has
// been idle for GroupTTL, anywhere ahead of it) is accepted.
func (d *Decoder) Head() (group uint32, ok bool) { return d.head, d.started }

// StoredBytes is the symbol storage currently allocated, never above the cap.
func (d *Decoder) StoredBytes() int { return len(d.arena) * slabLen }

// Trim releases the symbol arena and the recovery's scratch when no group
// holds symbols (a lane gone quiet: groups expire after GroupTTL), so an
// idle lane keeps only its window bookkeeping, not the up to MaxBytes of
// slabs a burst of loss left behind. The next symbol grows them again. It
// reports whether anything was released.
func (d *Decoder) Trim() bool {
	if len(d.arena) == 0 && d.er == nil {
		return false
	}
	for i := range d.slots {
		if d.slots[i].nStored > 0 {
			return false
		}
	}
	d.arena, d.free = nil, d.free[:0]
	d.er = nil
	return true
}

// CapBytes is the effective storage cap (MaxBytes, raised to one full group).
func (d *Decoder) CapBytes() int { return d.maxSlabs * slabLen }

// Deliver takes one data symbol, received (recovered false) or
// reconstructed from parity (recovered true), and reports whether it
// accepted it: false means the symbol is not what its sender
// sent (it failed its AEAD open), so the decoder forgets a received one as
// an erasure that parity may still recover. It may modify the slice in
// place but must not keep it: the decoder copies what it needs first.
type Deliver func(sym []byte, recovered bool) bool

// Push accepts one symbol whose header and length are authenticated (the
// datagram tag covers them, not the payload: see crypto/frame.go). Data
// symbols are handed to deliver at once (never twice once accepted);
// recovered data symbols are handed to deliver as soon as the group has any
// K of its K+R symbols. A data symbol deliver refuses counts as never
// received, so a symbol changed on the path costs what a drop costs. A
// reconstruction from a changed parity symbol yields symbols deliver
// refuses: they are counted and dropped, the group forgets the parity it
// used (a genuine copy that arrives later is taken, not counted a
// duplicate) and recovers from the next parity to arrive, at most R times
// per group.
func (d *Decoder) Push(m Meta, sym []byte, now time.Time, deliver Deliver) {
	if !d.validMeta(m, len(sym)) {
		d.stats.Invalid++
		return
	}
	s := d.slotFor(m.Group, now)
	if s == nil {
		return
	}
	idx := int(m.Index)
	if m.Kind == KindData {
		if !d.pushData(s, m, sym, deliver) {
			return
		}
	} else {
		if s.present.has(idx) {
			d.stats.Duplicates++
			return
		}
		d.pushParity(s, m, sym)
	}
	s.present.add(idx)
	if s.state == stateOpen {
		d.tryRecover(s, deliver)
	}
}

func (d *Decoder) validMeta(m Meta, n int) bool {
	switch m.Kind {
	case KindData:
		return n >= 1 && n <= MaxSymbolLen &&
			validRatio(int(m.K), int(m.R)) && m.Index < m.K
	case KindParity:
		return n > lenPrefix && n <= MaxParityLen &&
			validRatio(int(m.K), int(m.R)) && m.R > 0 &&
			m.Index >= m.K && int(m.Index) < int(m.K)+int(m.R)
	}
	return false
}

// pushData delivers a data symbol, keeping a copy for recovery, and
// reports whether deliver accepted it (a duplicate counts as accepted).
func (d *Decoder) pushData(s *slot, m Meta, sym []byte, deliver Deliver) bool {
	idx := int(m.Index)
	if s.delivered.has(idx) {
		d.stats.Duplicates++
		return true
	}
	d.stats.DataIn++
	s.dataK = max(s.dataK, m.K)
	s.dataR = max(s.dataR, m.R)
	s.maxIdx = max(s.maxIdx, m.Index+1)
	if s.state == stateOpen {
		if s.kKnown && (m.Index >= s.k || lenPrefix+len(sym) > int(s.shardLen)) {
			d.corrupt(s)
		} else if m.R > 0 || s.kKnown {
			// Keep a copy for recovering the group's other symbols; a
			// group announced with R=0 will never have parity.
			if b := d.store(s, idx); b >= 0 {
				buf := d.arena[b]
				binary.BigEndian.PutUint16(buf, uint16(len(sym)))
				copy(buf[lenPrefix:], sym)
				s.lens[idx] = uint16(len(sym))
			}
		}
	}
	// Copy first, deliver second: deliver may decrypt in place.
	if !deliver(sym, false) {
		// Changed on the path: an erasure, so the copy must not take
		// part in a reconstruction.
		d.stats.Rejected++
		d.unstore(s, idx)
		return false
	}
	s.delivered.add(idx)
	d.stats.Delivered++
	d.checkDone(s)
	return true
}

func (d *Decoder) pushParity(s *slot, m Meta, sym []byte) {
	d.stats.ParityIn++
	if s.state != stateOpen {
		if s.kKnown && (m.K != s.k || m.R != s.r) {
			d.stats.Inconsistent++
		}
		return
	}
	if !s.kKnown {
		s.kKnown, s.k, s.r, s.shardLen = true, m.K, m.R, uint16(len(sym))
		// Data symbols seen so far must fit the group parity describes.
		if s.maxIdx > s.k || s.dataK < s.k && s.dataK != 0 {
			d.corrupt(s)
			return
		}
		for i := 0; i < int(s.maxIdx); i++ {
			if s.buf(i) >= 0 && lenPrefix+int(s.lens[i]) > len(sym) {
				d.corrupt(s)
				return
			}
		}
		d.checkDone(s)
		if s.state != stateOpen {
			return
		}
	} else if m.K != s.k || m.R != s.r || len(sym) != int(s.shardLen) {
		d.corrupt(s)
		return
	}
	if b := d.store(s, int(m.Index)); b >= 0 {
		copy(d.arena[b], sym)
	}
}

// checkDone frees a group's storage once every data symbol has been handed
// out: nothing is left to recover.
func (d *Decoder) checkDone(s *slot) {
	if s.state != stateOpen {
		return
	}
	k := s.dataK
	if s.kKnown {
		k = s.k
	}
	if k > 0 && s.delivered.allBelow(int(k)) {
		s.state = stateDone
		d.freeBufs(s)
	}
}

func (d *Decoder) corrupt(s *slot) {
	d.stats.Inconsistent++
	s.state = stateCorrupt
	d.freeBufs(s)
}
