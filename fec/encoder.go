package fec

import (
	"encoding/binary"
	"time"

	"github.com/klauspost/reedsolomon"
)

// DefaultFlushTimeout bounds how long a lost packet of a partial group waits
// for its parity: long enough that a busy lane fills groups instead of
// flushing them, short enough to stay well under a TCP RTO or a VoIP jitter
// buffer.
const DefaultFlushTimeout = 5 * time.Millisecond

// MaxFlushTimeout caps FlushFor.
const MaxFlushTimeout = 15 * time.Millisecond

// FlushFor is the flush timeout for a path of round-trip time rtt: a quarter
// of it, within [DefaultFlushTimeout, MaxFlushTimeout]. A lost packet's
// recovery then arrives within the reordering a loss-based TCP tolerates
// on that path (RACK waits about RTT/4), and a slow lane on a long path
// gets groups large enough for FEC to work with: at 9k packets/s, 5 ms
// holds 44 symbols, 12.5 ms 112, which a loss burst spread over several
// groups needs.
func FlushFor(rtt time.Duration) time.Duration {
	return min(max(rtt/4, DefaultFlushTimeout), MaxFlushTimeout)
}

// Size classes. A parity symbol is as long as the longest data symbol of its
// group, so one group mixing 64-byte ACKs with 1424-byte segments pays
// full-size parity for the ACKs: on a 7:4:1 IMIX, 12:3 cost 100% in bytes
// for 25% in symbols. The encoder therefore keeps one open group per class
// of symbol length, and parity bytes track the data bytes they protect.
// The bounds are symbol lengths (inner packet + 24 bytes of AEAD counter and
// tag): ACKs, DNS and voice below 256; mid-size packets below 1024; full
// segments above. The decoder needs no change: a class is only a group.
const numClasses = 3

var classMax = [numClasses]int{256, 1024, MaxSymbolLen}

// SmallSymbol reports whether a symbol of n bytes goes in the smallest
// class: an ACK, a DNS message, a voice frame, a ping.
func SmallSymbol(n int) bool { return n <= classMax[0] }

// maxSpan is how many newer groups may begin while a class's group is still
// open before it is closed early: a slow class's symbols must stay inside
// the peer's decoder window (DefaultMaxGroups = 32 groups behind the
// newest, the same in every release), however much faster another class
// runs; the other 16 groups are the window's margin for reordering.
const maxSpan = 16

func classOf(n int) int {
	switch {
	case n <= classMax[0]:
		return 0
	case n <= classMax[1]:
		return 1
	}
	return 2
}

// EncoderConfig sets up one lane's encoder.
type EncoderConfig struct {
	K, R int // initial ratio; R=0 sends no parity ("fec = off")
	// FlushTimeout closes a partial group this long after its first symbol;
	// zero means DefaultFlushTimeout.
	FlushTimeout time.Duration
	// FirstGroup lets a lane start its group ids anywhere, so tests can
	// exercise the wrap and peers need not agree on an origin.
	FirstGroup uint32
}

// MaxDepth bounds interleaving (SetDepth): how many groups of one class
// are filled round robin.
const MaxDepth = 4

// group is one FEC group of a class's block, and its parity once closed.
type group struct {
	n      int // data symbols in it
	id     uint32
	maxLen int      // its longest length-prefixed symbol
	dirty  int      // parity bytes written since the last clear
	dirtyR int      // parity slabs written since the last clear
	parity [][]byte // arena: one slab per parity row
	cnt    int      // parity symbols of the closed group
	pMeta  Meta
}

// class is one size class: its open block of d groups, filled round robin
// so that consecutive symbols of the class go to different groups (a loss
// burst on the wire then costs each group fewer symbols), and the parity of
// its last closed block, handed out row by row across the groups for the
// same reason.
type class struct {
	slab  int // slab length: the class's longest parity
	open  bool
	k, r  int // ratio of the open block's groups
	d     int // groups in the open block
	next  int // group the next symbol goes to
	start time.Time
	first uint32 // id of the block's first group
	grp   [MaxDepth]group

	pRow, pGrp int // next parity to hand out: row, group
	pLeft      int // parity symbols not yet handed out
}

// Encoder turns a lane's sealed packets into data symbols and, per group,
// parity symbols. It is not safe for concurrent use: one per lane.
//
// Each data symbol is folded into the group's parity as it is added (see
// codec.go for why the matrix allows that), so the encoder keeps no copy of
// it and closing a group costs nothing.
type Encoder struct {
	nextK, nextR int    // ratio the next block to begin takes (SetRatio)
	nextD        int    // its depth (SetDepth)
	group        uint32 // id the next group to begin takes
	flush        time.Duration
	cls          [numClasses]class

	// partial[n] is the parity count for a group closed early with n < K
	// data symbols (SetPartialParity); unset, such a group gets R.
	partial   [MaxK]uint8
	partialOK bool
	// capSmall: a group of the smallest class that closes early carries
	// at most one parity symbol per data symbol (SetSmallCap).
	capSmall bool

	pfx    [MaxR][]byte
	body   [MaxR][]byte
	lenBuf [lenPrefix]byte
	codecs [MaxR + 1]reedsolomon.Encoder // per R, shared (parityCodec)

	dropped uint64
}

// NewEncoder validates cfg. Parity slabs and codecs are made as groups
// first need them.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) {
	if !validRatio(cfg.K, cfg.R) {
		return nil, ErrRatio
	}
	e := &Encoder{nextK: cfg.K, nextR: cfg.R, nextD: 1, flush: cfg.FlushTimeout, group: cfg.FirstGroup}
	if e.flush <= 0 {
		e.flush = DefaultFlushTimeout
	}
	for i := range e.cls {
		e.cls[i].slab = lenPrefix + classMax[i]
	}
	// The codec for R now, so a ratio the library refuses fails here;
	// the parity slabs come with the first group that needs them
	// (prepare): a lane's keys that never send carry none.
	if cfg.R > 0 {
		enc, err := parityCodec(cfg.R)
		if err != nil {
			return nil, err
		}
		e.codecs[cfg.R] = enc
	}
	return e, nil
}

// prepare makes g's slabs and the codec for r parity rows. It allocates
// only when r exceeds anything g has seen, so steady state is
// allocation-free.
func (e *Encoder) prepare(slab int, g *group, r int) error {
	for len(g.parity) < r {
		g.parity = append(g.parity, make([]byte, slab))
	}
	if r > 0 && e.codecs[r] == nil {
		enc, err := parityCodec(r)
		if err != nil {
			return err
		}
		e.codecs[r] = enc
	}
	return nil
}

// SetRatio changes K:R for the blocks that begin from now on; a group
// already begun keeps the ratio its data symbols announced.
func (e *Encoder) SetRatio(k, r int) error {
	if !validRatio(k, r) {
		return ErrRatio
	}
	e.nextK, e.nextR = k, r
	return nil
}

// SetFlushTimeout changes the flush timeout (zero: DefaultFlushTimeout),
// for open blocks too.
func (e *Encoder) SetFlushTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultFlushTimeout
	}
	e.flush = d
}

// FlushTimeout is the flush timeout in force.
func (e *Encoder) FlushTimeout() time.Duration { return e.flush }

// SetDepth sets how many groups of a class the blocks that begin from now
// on fill round robin (1: none; clamped to 1..MaxDepth). The peer needs
// nothing for it: each group is complete as usual, only its symbols are
// spread over d times the span on the wire.
func (e *Encoder) SetDepth(d int) { e.nextD = min(max(d, 1), MaxDepth) }

// SetPartialParity sets how many parity symbols a group closed early (flush
// timeout, Flush, or another class running ahead) carries: rs[n] for n data
// symbols, at most the group's R and at least 1; n beyond rs, or rs[n] = 0,
// means R. nil restores R for every partial group. The parity rows do not
// depend on R (codec.go), so the first rs[n] rows are what a group of n:rs[n]
// would have sent. The table is copied.
func (e *Encoder) SetPartialParity(rs []uint8) {
	clear(e.partial[:])
	e.partialOK = rs != nil
	copy(e.partial[:], rs)
}

// SetSmallCap sets whether a group of the smallest size class (pings,
// ACKs: SmallSymbol) that closes early carries at most one parity symbol
// per data symbol, whatever SetPartialParity or R says: for a lane that
// sends little else now, while its ratio was sized for a flow before.
// Larger symbols (a flow's data, a lone retransmission) keep their table.
func (e *Encoder) SetSmallCap(on bool) { e.capSmall = on }

// Ratio returns the K:R that blocks begun from now on take.
func (e *Encoder) Ratio() (k, r int) { return e.nextK, e.nextR }

// Depth returns the depth that blocks begun from now on take.
func (e *Encoder) Depth() int { return e.nextD }

// Add registers sym as the next data symbol of its size class and returns the
// header fields to send it with. The caller sends sym right away and then
// drains NextParity: if sym completed its block (or made another class's
// block close), parity is ready.
func (e *Encoder) Add(sym []byte, now time.Time) (Meta, error) {
	if len(sym) == 0 || len(sym) > MaxSymbolLen {
		return Meta{}, ErrSymbolLen
	}
	c := &e.cls[classOf(len(sym))]
	if c.open && c.r == 0 && (e.nextR != 0 || e.nextK != c.k || !now.Before(c.start.Add(e.flush))) {
		// A block without parity has nothing to flush, but it must not
		// outlive the flush timeout either: a sparse lane then gives each
		// packet its own group (the decoder counts a group lost whole, so
		// its loss shows without parity), and parity asked for since
		// (SetRatio) starts with the next packet, not K packets later.
		e.closeBlock(c)
	}
	if !c.open {
		e.beginBlock(c, now)
	}
	g := &c.grp[c.next]
	if g.n == 0 {
		e.beginGroup(c, g)
	}
	m := Meta{Kind: KindData, Group: g.id, Index: uint8(g.n), K: uint8(c.k), R: uint8(c.r)}
	if c.r > 0 {
		// Parity covers len‖sym zero-extended; the zero tail contributes
		// nothing, so each part is folded into its own range of parity.
		binary.BigEndian.PutUint16(e.lenBuf[:], uint16(len(sym)))
		end := lenPrefix + len(sym)
		for j := range c.r {
			e.pfx[j] = g.parity[j][:lenPrefix]
			e.body[j] = g.parity[j][lenPrefix:end]
		}
		enc := e.codecs[c.r]
		if enc.EncodeIdx(e.lenBuf[:], g.n, e.pfx[:c.r]) != nil ||
			enc.EncodeIdx(sym, g.n, e.body[:c.r]) != nil {
			// Unreachable with validated lengths and ratio; sending the
			// block unprotected beats failing the lane.
			c.r = 0
		}
		g.maxLen = max(g.maxLen, end)
		g.dirty = max(g.dirty, end)
		g.dirtyR = max(g.dirtyR, c.r)
	}
	g.n++
	if c.next++; c.next == c.d {
		c.next = 0
		if g.n == c.k {
			// The last group filled, and with it the block.
			e.closeBlock(c)
		}
	}
	return m, nil
}

// beginBlock opens a block in c under the ratio and depth now in force:
// c's previous parity must be handed out by now, since its slabs are about
// to be cleared and reused.
func (e *Encoder) beginBlock(c *class, now time.Time) {
	e.dropped += uint64(c.pLeft)
	c.pLeft = 0
	for i := range c.grp {
		g := &c.grp[i]
		// Clear what was written, under whatever R was then in force.
		for j := range g.dirtyR {
			clear(g.parity[j][:g.dirty])
		}
		g.dirty, g.dirtyR, g.n, g.maxLen, g.cnt = 0, 0, 0, 0, 0
	}
	c.k, c.r, c.d = e.nextK, e.nextR, e.nextD
	if c.r == 0 {
		c.d = 1 // nothing to protect: nothing to spread
	}
	for i := range c.d {
		if e.prepare(c.slab, &c.grp[i], c.r) != nil {
			c.r = 0
		}
	}
	c.open, c.next, c.start = true, 0, now
}

// beginGroup gives g the next group id. Another class's block whose first
// group has fallen maxSpan groups behind is closed.
func (e *Encoder) beginGroup(c *class, g *group) {
	g.id = e.group
	e.group++
	if c.next == 0 {
		c.first = g.id
	}
	for i := range e.cls {
		if o := &e.cls[i]; o.open && o != c && e.group-o.first > maxSpan {
			e.closeBlock(o)
		}
	}
}

// Deadline is when Tick must next run to flush an open block; ok is false
// when nothing is waiting for parity.
func (e *Encoder) Deadline() (t time.Time, ok bool) {
	for i := range e.cls {
		c := &e.cls[i]
		if !c.open || c.r == 0 {
			continue
		}
		if d := c.start.Add(e.flush); !ok || d.Before(t) {
			t, ok = d, true
		}
	}
	return t, ok
}

// Tick flushes the open blocks whose flush timeout has passed, and reports
// whether parity is now waiting in NextParity.
func (e *Encoder) Tick(now time.Time) bool {
	for i := range e.cls {
		c := &e.cls[i]
		if c.open && c.r > 0 && !now.Before(c.start.Add(e.flush)) {
			e.closeBlock(c)
		}
	}
	return e.pending()
}

// Flush closes the open blocks now (e.g. the lane goes idle or rekeys) and
// reports whether parity is waiting. With R=0 there is nothing to protect,
// so such a block stays open and keeps numbering symbols until its flush
// timeout passes (Add closes it then).
func (e *Encoder) Flush() bool {
	for i := range e.cls {
		if c := &e.cls[i]; c.open && c.r > 0 {
			e.closeBlock(c)
		}
	}
	return e.pending()
}

func (e *Encoder) pending() bool {
	for i := range e.cls {
		if e.cls[i].pLeft > 0 {
			return true
		}
	}
	return false
}

// NextParity returns the next parity symbol of a closed block: row by row
// across its groups. The slice points into the encoder's arena and is
// valid until the next Add (which may start reusing it), so drain parity
// right after the Add, Tick or Flush that produced it.
func (e *Encoder) NextParity() (Meta, []byte, bool) {
	for i := range e.cls {
		c := &e.cls[i]
		for c.pLeft > 0 {
			g := &c.grp[c.pGrp]
			row := c.pRow
			if c.pGrp++; c.pGrp == c.d {
				c.pGrp, c.pRow = 0, c.pRow+1
			}
			if row >= g.cnt {
				continue
			}
			c.pLeft--
			m := g.pMeta
			m.Index += uint8(row)
			return m, g.parity[row][:g.maxLen], true
		}
	}
	return Meta{}, nil, false
}

// DroppedParity counts parity symbols not drained before their class's
// next block began: a caller bug or a stalled sender, never expected in
// steady state.
func (e *Encoder) DroppedParity() uint64 { return e.dropped }

// closeBlock publishes the parity of c's groups (already complete, see Add)
// with each group's actual K, and as many parity symbols as
// SetPartialParity asks for a group that ended early.
func (e *Encoder) closeBlock(c *class) {
	c.open = false
	c.pRow, c.pGrp, c.pLeft = 0, 0, 0
	if c.r == 0 {
		return
	}
	for i := range c.d {
		g := &c.grp[i]
		if g.n == 0 {
			continue
		}
		g.cnt = c.r
		if g.n < c.k && e.partialOK {
			if want := int(e.partial[g.n]); want > 0 {
				g.cnt = min(g.cnt, want)
			}
		}
		if g.n < c.k && e.capSmall && c == &e.cls[0] {
			g.cnt = min(g.cnt, g.n)
		}
		g.pMeta = Meta{Kind: KindParity, Group: g.id, Index: uint8(g.n), K: uint8(g.n), R: uint8(g.cnt)}
		c.pLeft += g.cnt
	}
}
