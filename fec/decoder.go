package fec

import (
	"encoding/binary"
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
	start       time.Time
	present     indexSet // distinct indices received
	delivered   indexSet // data indices handed out
	nStored     uint16
	// spoiled counts reconstructions whose output failed to open: a parity
	// symbol was changed on the path (see tryRecover).
	spoiled uint8
	lens    [MaxK]uint16       // payload length of stored data symbols
	bufs    [MaxK + MaxR]int16 // arena slab per index, -1 if none
}

// Decoder reassembles one lane. Not safe for concurrent use.
type Decoder struct {
	cfg     DecoderConfig
	mask    uint32
	slots   []slot
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
	maxSlabs := max(cfg.MaxBytes/slabLen, MaxK+MaxR)
	d := &Decoder{
		cfg:      cfg,
		mask:     uint32(cfg.MaxGroups - 1),
		slots:    make([]slot, cfg.MaxGroups),
		maxSlabs: maxSlabs,
		free:     make([]int16, 0, maxSlabs),
	}
	return d
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

// Deliver takes one data symbol (received, or recovered) and reports
// whether it accepted it: false means the symbol is not what its sender
// sent (it failed its AEAD open), so the decoder forgets a received one as
// an erasure that parity may still recover. It may modify the slice in
// place but must not keep it: the decoder copies what it needs first.
type Deliver func(sym []byte) bool

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

// slotFor places group g in the window, sliding or resynchronising it as
// needed. It returns nil (and counts why) for symbols outside the window.
func (d *Decoder) slotFor(g uint32, now time.Time) *slot {
	if !d.started {
		d.started, d.head, d.first = true, g, g
	}
	// Serial-number arithmetic: ids wrap, so g is ahead of head when the
	// signed 32-bit difference is positive and behind when negative.
	ahead := int64(int32(g - d.head))
	switch {
	case -ahead >= int64(len(d.slots)):
		// Behind the window, however long the lane has been idle: a
		// sender only moves forwards (a restarted one has new keys and
		// meets a new decoder), so this is a late or replayed datagram.
		// Letting it move the window back would make every genuine
		// group after it "too far ahead".
		d.stats.Late++
		return nil
	case ahead > int64(d.cfg.MaxAhead):
		if now.Sub(d.lastSeen) < d.cfg.GroupTTL {
			d.stats.FarAhead++
			return nil
		}
		// Idle long enough that nothing in the window is still useful:
		// we lost a long outage's worth of groups. Resynchronise
		// forwards only.
		d.stats.Resyncs++
		for i := range d.slots {
			d.retire(&d.slots[i])
		}
		d.head, d.first = g, g
	case ahead > 0:
		// Slide: every slot the new groups map to holds a group that now
		// falls behind the window.
		n := int64(len(d.slots))
		steps := min(ahead, n)
		for i := int64(1); i <= steps; i++ {
			s := &d.slots[(d.head+uint32(i))&d.mask]
			if leaving := d.head + uint32(i) - uint32(n); s.start.IsZero() || s.group != leaving {
				d.unseen(leaving)
			}
			d.retire(s)
		}
		for id := d.head + 1; int32(g-uint32(n)-id) >= 0; id++ {
			d.unseen(id) // jumped over without ever having a slot
		}
		// The groups between the old head and g that keep a slot: a
		// symbol of each may still arrive (reordering) within GroupTTL;
		// Tick counts those that do not.
		first := d.head + 1
		if ahead > n {
			first = g - uint32(n) + 1
		}
		if lo := g - uint32(n); int32(lo-d.first) > 0 {
			d.first = lo // the ids before the window are never counted again: keep first near them, so its serial comparison never wraps
		}
		for id := first; id != g; id++ {
			s := &d.slots[id&d.mask]
			*s = slot{group: id, state: stateMissing, start: now}
			for i := range s.bufs {
				s.bufs[i] = -1
			}
			if exp := now.Add(d.cfg.GroupTTL); d.nextExpiry.IsZero() || exp.Before(d.nextExpiry) {
				d.nextExpiry = exp
			}
		}
		d.head = g
	}
	d.lastSeen = now
	s := &d.slots[g&d.mask]
	if s.state == stateFree || s.state == stateMissing || s.group != g {
		counted := false
		if s.state != stateMissing || s.group != g {
			d.retire(s)
		} else {
			// A missing group that arrives after all. If Tick already
			// counted it lost, its loss report may be out: it is not
			// counted again (account).
			counted = s.accounted
		}
		*s = slot{group: g, state: stateOpen, start: now, countedLost: counted}
		for i := range s.bufs {
			s.bufs[i] = -1
		}
		if exp := now.Add(d.cfg.GroupTTL); d.nextExpiry.IsZero() || exp.Before(d.nextExpiry) {
			d.nextExpiry = exp
		}
	}
	return s
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
	if !deliver(sym) {
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
			if s.bufs[i] >= 0 && lenPrefix+int(s.lens[i]) > len(sym) {
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

// tryRecover reconstructs the group's missing data once K of its symbols are
// stored (erasures.solve). Output buffers come from the arena; nothing is
// allocated but the solver's scratch, once per decoder (Trim releases it).
// The parity symbols used are overwritten: after a recovery the group is
// done, or, if a reconstruction is refused, forgets its parity (spoiled).
func (d *Decoder) tryRecover(s *slot, deliver Deliver) {
	if !s.kKnown || int(s.nStored) < int(s.k) {
		return
	}
	k, r, size := int(s.k), int(s.r), int(s.shardLen)
	if d.er == nil {
		enc, err := mulAddCodec()
		if err != nil {
			return
		}
		d.er = &erasures{m: mulAdder{enc: enc}}
	}
	// Missing data (or delivered but not stored under the byte cap) is
	// solved for, into a slab each: at most R of these, since
	// nStored >= K.
	e := 0
	for i := range k {
		if b := s.bufs[i]; b >= 0 {
			buf := d.arena[b][:size]
			clear(buf[lenPrefix+int(s.lens[i]):])
			d.er.data[i] = buf
			continue
		}
		d.er.data[i] = nil
		t := d.takeSlab(s)
		if t < 0 {
			d.releaseTmp(e)
			clear(d.er.data[:i])
			clear(d.er.out[:e])
			d.stats.NotStored++
			return
		}
		d.er.tmp[e], d.er.lost[e] = t, uint8(i)
		d.er.out[e] = d.arena[t][:size]
		clear(d.er.out[e])
		e++
	}
	// As many parity symbols as data symbols are lost: the first to have
	// arrived.
	n := 0
	for j := 0; j < r && n < e; j++ {
		if b := s.bufs[k+j]; b >= 0 {
			d.er.parity[n], d.er.rows[n] = d.arena[b][:size], uint8(j)
			n++
		}
	}
	ok := n == e && d.er.solve(d.er.data[:k], d.er.lost[:e], d.er.parity[:e], d.er.rows[:e], d.er.out[:e])
	clear(d.er.data[:k])
	clear(d.er.parity[:e])
	if !ok {
		d.releaseTmp(e)
		clear(d.er.out[:e])
		d.corrupt(s)
		return
	}
	refused := false
	for x, i := range d.er.lost[:e] {
		b := d.er.out[x]
		d.er.out[x] = nil
		if s.delivered.has(int(i)) {
			continue // delivered before, only not stored
		}
		n := int(binary.BigEndian.Uint16(b))
		if n == 0 || lenPrefix+n > size {
			// Parity that passed the tag but encodes garbage (a broken
			// peer: the tag covers the bytes a length prefix is
			// reconstructed from), spoiled like a refused symbol.
			d.stats.Inconsistent++
			refused = true
			continue
		}
		if !deliver(b[lenPrefix : lenPrefix+n]) {
			// Reconstructed from a symbol changed on the path. Not
			// marked delivered: a late original is still taken.
			d.stats.Rejected++
			refused = true
			continue
		}
		s.delivered.add(int(i))
		d.stats.Recovered++
	}
	d.releaseTmp(e)
	if refused {
		d.spoiled(s)
		return
	}
	s.state = stateDone
	d.freeBufs(s)
}

// spoiled handles a reconstruction that yielded a symbol deliver refused.
// Stored data symbols all opened (a refused one is never kept), so a
// parity symbol the reconstruction used was changed on the path: the group
// forgets every parity symbol it holds, as if none had arrived, and waits
// for more. After maxSpoils such reconstructions (or R, if fewer) it gives
// up, so changed copies cost at most maxSpoils reconstructions per group:
// with up to 63 parity symbols, one per parity symbol would let an
// on-path attacker buy dozens of reconstructions per group.
func (d *Decoder) spoiled(s *slot) {
	d.stats.Spoiled++
	s.spoiled++
	if s.spoiled >= min(s.r, maxSpoils) {
		s.state = stateDone
		d.freeBufs(s)
		return
	}
	for j := int(s.k); j < int(s.k)+int(s.r); j++ {
		if s.bufs[j] >= 0 {
			d.unstore(s, j)
			s.present.remove(j)
		}
	}
}

// maxSpoils is how many refused reconstructions a group allows (spoiled):
// enough to get past one changed copy, no more.
const maxSpoils = 2

func (d *Decoder) releaseTmp(n int) {
	d.free = append(d.free, d.er.tmp[:n]...)
}

// store reserves a slab for symbol idx of s and returns it, or -1 if the cap
// leaves no room even after evicting older groups.
func (d *Decoder) store(s *slot, idx int) int16 {
	b := d.takeSlab(s)
	if b < 0 {
		d.stats.NotStored++
		return -1
	}
	s.bufs[idx] = b
	s.nStored++
	return b
}

// unstore releases the copy of symbol idx of s, if one was kept.
func (d *Decoder) unstore(s *slot, idx int) {
	if b := s.bufs[idx]; b >= 0 {
		d.free = append(d.free, b)
		s.bufs[idx] = -1
		s.nStored--
	}
}

// takeSlab gets a free slab: from the free list, by growing the arena up to
// the cap, or by evicting the oldest open group other than keep.
func (d *Decoder) takeSlab(keep *slot) int16 {
	if n := len(d.free); n > 0 {
		b := d.free[n-1]
		d.free = d.free[:n-1]
		return b
	}
	if len(d.arena) < d.maxSlabs {
		d.arena = append(d.arena, make([]byte, slabLen))
		return int16(len(d.arena) - 1)
	}
	for i := len(d.slots) - 1; i >= 0; i-- {
		s := &d.slots[(d.head-uint32(i))&d.mask]
		if s != keep && s.state == stateOpen && s.nStored > 0 {
			d.stats.Evicted++
			d.close(s)
			return d.takeSlab(keep)
		}
	}
	return -1
}

func (d *Decoder) freeBufs(s *slot) {
	if s.nStored == 0 {
		return
	}
	for i, b := range s.bufs {
		if b >= 0 {
			d.free = append(d.free, b)
			s.bufs[i] = -1
		}
	}
	s.nStored = 0
}

// close gives up on recovering s (expired or evicted) but keeps its
// bitmaps, so a late original is still delivered once and never twice.
func (d *Decoder) close(s *slot) {
	if s.state == stateMissing {
		if !s.accounted {
			s.accounted = true
			d.unseen(s.group)
		}
		return
	}
	if s.state == stateOpen {
		s.state = stateClosed
	}
	d.freeBufs(s)
	d.account(s)
}

// retire removes s from the window entirely.
func (d *Decoder) retire(s *slot) {
	if s.state == stateFree {
		return
	}
	d.close(s)
	s.state = stateFree
}

// unseen counts group id, which never arrived, as lost: at least one data
// symbol (a group gets its id with its first). Without it a lane whose
// groups are single packets (pings, a sparse flow, a lane without parity)
// would report no loss however much it lost. It adds no run: how long
// the burst that took a whole group was is unknown, and counting it as
// one symbol would make bursty loss look independent. Groups before the
// decoder's first are not counted.
func (d *Decoder) unseen(id uint32) {
	if int32(id-d.first) <= 0 {
		return
	}
	d.stats.Unrecoverable++
	d.stats.LostData++
	d.loss.Expected = satAdd(d.loss.Expected, 1)
	d.loss.Unrecovered = satAdd(d.loss.Unrecovered, 1)
}

// account adds a finished group to the loss counters, once.
func (d *Decoder) account(s *slot) {
	if s.accounted {
		return
	}
	s.accounted = true
	if s.countedLost {
		return
	}
	// Without parity the group's true K is unknown (a flushed group is
	// shorter than its data symbols announce); assume it ended at the
	// highest data index seen, so a lost parity never counts as lost data.
	// Its parity count is unknown too when it ended early: a sender may
	// give such a group fewer than the R its data announced
	// (Encoder.SetPartialParity), so only a full group counts R parity
	// as lost, lest the report overstate loss and bursts.
	k, r := int(s.maxIdx), int(s.dataR)
	if s.maxIdx < s.dataK {
		r = 0
	}
	if s.kKnown {
		k, r = int(s.k), int(s.r)
	}
	recv := s.present.count()
	d.loss.Expected = satAdd(d.loss.Expected, uint32(max(k+r, recv)))
	d.loss.Received = satAdd(d.loss.Received, uint32(recv))
	d.loss.Runs = satAdd(d.loss.Runs, uint32(s.present.runsMissingBelow(k+r)))
	if missing := k - s.delivered.countBelow(k); missing > 0 {
		d.stats.Unrecoverable++
		d.stats.LostData += uint64(missing)
		d.loss.Unrecovered = satAdd(d.loss.Unrecovered, uint32(missing))
	}
}

// Tick expires groups older than GroupTTL. Call it every few milliseconds
// from the lane loop; Push never waits on it. It costs one comparison
// until the oldest unfinished group falls due (a hub ticks thousands of
// idle lanes), and reports whether it closed a group.
func (d *Decoder) Tick(now time.Time) bool {
	if d.nextExpiry.IsZero() || now.Before(d.nextExpiry) {
		return false
	}
	closed := false
	var next time.Time
	for i := range d.slots {
		s := &d.slots[i]
		if s.state == stateFree || s.accounted {
			continue
		}
		if exp := s.start.Add(d.cfg.GroupTTL); now.Before(exp) {
			if next.IsZero() || exp.Before(next) {
				next = exp
			}
			continue
		}
		if s.state == stateOpen {
			d.stats.Expired++
		}
		d.close(s)
		closed = true
	}
	d.nextExpiry = next
	return closed
}
