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

// class is one size class's open group and the parity of its last closed
// group.
type class struct {
	k, r   int // ratio of the open group
	n      int // data symbols in it
	group  uint32
	start  time.Time // its first symbol
	maxLen int       // its longest length-prefixed symbol
	dirty  int       // parity bytes written since the last clear
	dirtyR int       // parity slabs written since the last clear
	slab   int       // slab length: the class's longest parity
	parity [][]byte  // arena: one slab per parity row

	pMeta  Meta
	pLen   int
	pNext  int
	pCount int
}

// Encoder turns a lane's sealed packets into data symbols and, per group,
// parity symbols. It is not safe for concurrent use: one per lane.
//
// Each data symbol is folded into the group's parity as it is added (see
// codec.go for why the matrix allows that), so the encoder keeps no copy of
// it and closing a group costs nothing.
type Encoder struct {
	nextK, nextR int    // ratio the next group to begin takes (SetRatio)
	group        uint32 // id the next group to begin takes
	flush        time.Duration
	cls          [numClasses]class

	// partial[n] is the parity count for a group closed early with n < K
	// data symbols (SetPartialParity); unset, such a group gets R.
	partial   [MaxK]uint8
	partialOK bool

	pfx    [MaxR][]byte
	body   [MaxR][]byte
	lenBuf [lenPrefix]byte
	codecs [MaxR + 1]reedsolomon.Encoder // per R, MaxK columns

	dropped uint64
}

// NewEncoder validates cfg. Parity slabs and codecs are made as classes
// first need them.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) {
	if !validRatio(cfg.K, cfg.R) {
		return nil, ErrRatio
	}
	e := &Encoder{nextK: cfg.K, nextR: cfg.R, flush: cfg.FlushTimeout, group: cfg.FirstGroup}
	if e.flush <= 0 {
		e.flush = DefaultFlushTimeout
	}
	for i := range e.cls {
		e.cls[i].slab = lenPrefix + classMax[i]
	}
	if err := e.prepare(&e.cls[len(e.cls)-1], cfg.R); err != nil {
		return nil, err
	}
	return e, nil
}

// prepare makes c's slabs and the codec for r parity rows. It allocates
// only when r exceeds anything c has seen, so steady state is
// allocation-free.
func (e *Encoder) prepare(c *class, r int) error {
	for len(c.parity) < r {
		c.parity = append(c.parity, make([]byte, c.slab))
	}
	if r > 0 && e.codecs[r] == nil {
		// MaxK columns: EncodeIdx only reads column Index, and columns do
		// not depend on K, so one codec per R serves every K.
		enc, err := reedsolomon.New(MaxK, r,
			reedsolomon.WithMaxGoroutines(1),
			reedsolomon.WithCustomMatrix(parityRows(MaxK, r)),
			reedsolomon.WithInversionCache(false))
		if err != nil {
			return err
		}
		e.codecs[r] = enc
	}
	return nil
}

// SetRatio changes K:R for the groups that begin from now on; a group
// already begun keeps the ratio its data symbols announced.
func (e *Encoder) SetRatio(k, r int) error {
	if !validRatio(k, r) {
		return ErrRatio
	}
	e.nextK, e.nextR = k, r
	return nil
}

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

// Ratio returns the K:R that groups begun from now on take.
func (e *Encoder) Ratio() (k, r int) { return e.nextK, e.nextR }

// Add registers sym as the next data symbol of its size class and returns the
// header fields to send it with. The caller sends sym right away and then
// drains NextParity: if sym completed its group (or made another class's
// group close), parity is ready.
func (e *Encoder) Add(sym []byte, now time.Time) (Meta, error) {
	if len(sym) == 0 || len(sym) > MaxSymbolLen {
		return Meta{}, ErrSymbolLen
	}
	c := &e.cls[classOf(len(sym))]
	if c.n == 0 {
		e.begin(c, now)
	}
	m := Meta{Kind: KindData, Group: c.group, Index: uint8(c.n), K: uint8(c.k), R: uint8(c.r)}
	if c.r > 0 {
		// Parity covers len‖sym zero-extended; the zero tail contributes
		// nothing, so each part is folded into its own range of parity.
		binary.BigEndian.PutUint16(e.lenBuf[:], uint16(len(sym)))
		end := lenPrefix + len(sym)
		for j := range c.r {
			e.pfx[j] = c.parity[j][:lenPrefix]
			e.body[j] = c.parity[j][lenPrefix:end]
		}
		enc := e.codecs[c.r]
		if enc.EncodeIdx(e.lenBuf[:], c.n, e.pfx[:c.r]) != nil ||
			enc.EncodeIdx(sym, c.n, e.body[:c.r]) != nil {
			// Unreachable with validated lengths and ratio; sending the
			// group unprotected beats failing the lane.
			c.r = 0
		}
		c.maxLen = max(c.maxLen, end)
		c.dirty = max(c.dirty, end)
		c.dirtyR = max(c.dirtyR, c.r)
	}
	c.n++
	if c.n == c.k {
		e.close(c)
	}
	return m, nil
}

// begin opens a group in c under the ratio now in force: c's previous
// parity must be handed out by now, since its slabs are about to be cleared
// and reused. Another class's group that has fallen maxSpan groups behind
// is closed.
func (e *Encoder) begin(c *class, now time.Time) {
	e.dropped += uint64(c.pCount - c.pNext)
	c.pCount, c.pNext = 0, 0
	// Clear what was written, under whatever R was then in force.
	for j := range c.dirtyR {
		clear(c.parity[j][:c.dirty])
	}
	c.dirty, c.dirtyR = 0, 0
	c.k, c.r = e.nextK, e.nextR
	if e.prepare(c, c.r) != nil {
		c.r = 0
	}
	c.group = e.group
	e.group++
	c.start = now
	c.maxLen = 0
	for i := range e.cls {
		if o := &e.cls[i]; o.n > 0 && e.group-o.group > maxSpan {
			e.close(o)
		}
	}
}

// Deadline is when Tick must next run to flush an open group; ok is false
// when nothing is waiting for parity.
func (e *Encoder) Deadline() (t time.Time, ok bool) {
	for i := range e.cls {
		c := &e.cls[i]
		if c.n == 0 || c.r == 0 {
			continue
		}
		if d := c.start.Add(e.flush); !ok || d.Before(t) {
			t, ok = d, true
		}
	}
	return t, ok
}

// Tick flushes the open groups whose flush timeout has passed, and reports
// whether parity is now waiting in NextParity.
func (e *Encoder) Tick(now time.Time) bool {
	for i := range e.cls {
		c := &e.cls[i]
		if c.n > 0 && c.r > 0 && !now.Before(c.start.Add(e.flush)) {
			e.close(c)
		}
	}
	return e.pending()
}

// Flush closes the open groups now (e.g. the lane goes idle or rekeys) and
// reports whether parity is waiting. With R=0 there is nothing to protect,
// so such a group stays open and keeps numbering symbols.
func (e *Encoder) Flush() bool {
	for i := range e.cls {
		if c := &e.cls[i]; c.n > 0 && c.r > 0 {
			e.close(c)
		}
	}
	return e.pending()
}

func (e *Encoder) pending() bool {
	for i := range e.cls {
		if e.cls[i].pNext < e.cls[i].pCount {
			return true
		}
	}
	return false
}

// NextParity returns the next parity symbol of a closed group. The slice
// points into the encoder's arena and is valid until the next Add (which
// may start reusing it), so drain parity right after the Add, Tick or Flush
// that produced it.
func (e *Encoder) NextParity() (Meta, []byte, bool) {
	for i := range e.cls {
		c := &e.cls[i]
		if c.pNext >= c.pCount {
			continue
		}
		m := c.pMeta
		m.Index += uint8(c.pNext)
		p := c.parity[c.pNext][:c.pLen]
		c.pNext++
		return m, p, true
	}
	return Meta{}, nil, false
}

// DroppedParity counts parity symbols not drained before their class's
// next group began: a caller bug or a stalled sender, never expected in
// steady state.
func (e *Encoder) DroppedParity() uint64 { return e.dropped }

// close publishes c's parity (already complete, see Add) with the group's
// actual K, and as many parity symbols as SetPartialParity asks for a group
// that ended early.
func (e *Encoder) close(c *class) {
	if c.r > 0 && c.n > 0 {
		cnt := c.r
		if c.n < c.k && e.partialOK {
			if want := int(e.partial[c.n]); want > 0 {
				cnt = min(cnt, want)
			}
		}
		c.pMeta = Meta{Kind: KindParity, Group: c.group, Index: uint8(c.n), K: uint8(c.n), R: uint8(cnt)}
		c.pLen, c.pCount, c.pNext = c.maxLen, cnt, 0
	}
	c.n = 0
}
