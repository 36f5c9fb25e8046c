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

// Encoder turns a lane's sealed packets into data symbols and, per group,
// parity symbols. It is not safe for concurrent use: one per lane.
//
// Each data symbol is folded into the group's parity as it is added (see
// codec.go for why the matrix allows that), so the encoder keeps no copy of
// it and closing a group costs nothing.
type Encoder struct {
	k, r         int // ratio of the open group
	nextK, nextR int // ratio for the next group (SetRatio)
	flush        time.Duration
	group        uint32
	n            int       // data symbols in the open group
	start        time.Time // first symbol of the open group
	maxLen       int       // longest length-prefixed symbol of the open group
	dirty        int       // parity bytes written since the last clear
	dirtyR       int       // parity slabs written since the last clear

	parity [][]byte // arena: R slabs of MaxParityLen
	pfx    [MaxR][]byte
	body   [MaxR][]byte
	lenBuf [lenPrefix]byte
	codecs [MaxR + 1]reedsolomon.Encoder // per R, MaxK columns

	// parity of the last closed group, handed out by NextParity.
	pMeta   Meta
	pLen    int
	pNext   int
	pCount  int
	dropped uint64
}

// NewEncoder validates cfg and preallocates the arena for its ratio.
func NewEncoder(cfg EncoderConfig) (*Encoder, error) {
	if !validRatio(cfg.K, cfg.R) {
		return nil, ErrRatio
	}
	e := &Encoder{
		k: cfg.K, r: cfg.R, nextK: cfg.K, nextR: cfg.R,
		flush: cfg.FlushTimeout,
		group: cfg.FirstGroup,
	}
	if e.flush <= 0 {
		e.flush = DefaultFlushTimeout
	}
	if err := e.prepare(); err != nil {
		return nil, err
	}
	return e, nil
}

// prepare makes the arena and codec for the current R. It allocates only
// when R exceeds anything seen before, so steady state is allocation-free.
func (e *Encoder) prepare() error {
	for len(e.parity) < e.r {
		e.parity = append(e.parity, make([]byte, slabLen))
	}
	if e.r > 0 && e.codecs[e.r] == nil {
		// MaxK columns: EncodeIdx only reads column Index, and columns do
		// not depend on K, so one codec per R serves every K.
		enc, err := reedsolomon.New(MaxK, e.r,
			reedsolomon.WithMaxGoroutines(1),
			reedsolomon.WithCustomMatrix(parityRows(MaxK, e.r)),
			reedsolomon.WithInversionCache(false))
		if err != nil {
			return err
		}
		e.codecs[e.r] = enc
	}
	return nil
}

// SetRatio changes K:R from the next group on; a group already begun keeps
// the ratio its data symbols announced.
func (e *Encoder) SetRatio(k, r int) error {
	if !validRatio(k, r) {
		return ErrRatio
	}
	e.nextK, e.nextR = k, r
	if e.n == 0 {
		e.k, e.r = k, r
		return e.prepare()
	}
	return nil
}

// Ratio returns the K:R of the open group.
func (e *Encoder) Ratio() (k, r int) { return e.k, e.r }

// Add registers sym as the next data symbol and returns the header fields to
// send it with. The caller sends sym right away and then drains NextParity:
// if sym completed the group, its R parity symbols are ready.
func (e *Encoder) Add(sym []byte, now time.Time) (Meta, error) {
	if len(sym) == 0 || len(sym) > MaxSymbolLen {
		return Meta{}, ErrSymbolLen
	}
	if e.n == 0 {
		e.begin(now)
	}
	m := Meta{Kind: KindData, Group: e.group, Index: uint8(e.n), K: uint8(e.k), R: uint8(e.r)}
	if e.r > 0 {
		// Parity covers len‖sym zero-extended; the zero tail contributes
		// nothing, so each part is folded into its own range of parity.
		binary.BigEndian.PutUint16(e.lenBuf[:], uint16(len(sym)))
		end := lenPrefix + len(sym)
		for j := range e.r {
			e.pfx[j] = e.parity[j][:lenPrefix]
			e.body[j] = e.parity[j][lenPrefix:end]
		}
		enc := e.codecs[e.r]
		if enc.EncodeIdx(e.lenBuf[:], e.n, e.pfx[:e.r]) != nil ||
			enc.EncodeIdx(sym, e.n, e.body[:e.r]) != nil {
			// Unreachable with validated lengths and ratio; sending the
			// group unprotected beats failing the lane.
			e.r = 0
		}
		e.maxLen = max(e.maxLen, end)
		e.dirty = max(e.dirty, end)
		e.dirtyR = max(e.dirtyR, e.r)
	}
	e.n++
	if e.n == e.k {
		e.close()
	}
	return m, nil
}

// begin starts a group: the previous group's parity must be handed out by
// now, since its buffers are about to be cleared and reused.
func (e *Encoder) begin(now time.Time) {
	e.dropped += uint64(e.pCount - e.pNext)
	e.pCount, e.pNext = 0, 0
	// Clear what was written, under whatever R was then in force.
	for j := range e.dirtyR {
		clear(e.parity[j][:e.dirty])
	}
	e.dirty, e.dirtyR = 0, 0
	e.start = now
	e.maxLen = 0
}

// Deadline is when Tick must next run to flush the open group; ok is false
// when nothing is waiting for parity.
func (e *Encoder) Deadline() (t time.Time, ok bool) {
	if e.n == 0 || e.r == 0 {
		return time.Time{}, false
	}
	return e.start.Add(e.flush), true
}

// Tick flushes the open group if its flush timeout has passed, and reports
// whether parity is now waiting in NextParity.
func (e *Encoder) Tick(now time.Time) bool {
	if d, ok := e.Deadline(); ok && !now.Before(d) {
		e.close()
		return e.pNext < e.pCount
	}
	return false
}

// Flush closes the open group now (e.g. the lane goes idle or rekeys) and
// reports whether parity is waiting. With R=0 there is nothing to protect,
// so the group stays open and keeps numbering symbols.
func (e *Encoder) Flush() bool {
	if e.n > 0 && e.r > 0 {
		e.close()
	}
	return e.pNext < e.pCount
}

// NextParity returns the next parity symbol of the last closed group. The
// slice points into the encoder's arena and is valid until the next Add
// (which starts reusing it), so drain parity right after the Add, Tick or
// Flush that produced it.
func (e *Encoder) NextParity() (Meta, []byte, bool) {
	if e.pNext >= e.pCount {
		return Meta{}, nil, false
	}
	m := e.pMeta
	m.Index += uint8(e.pNext)
	p := e.parity[e.pNext][:e.pLen]
	e.pNext++
	return m, p, true
}

// DroppedParity counts parity symbols not drained before the next group
// began: a caller bug or a stalled sender, never expected in steady state.
func (e *Encoder) DroppedParity() uint64 { return e.dropped }

// close publishes the open group's parity (already complete, see Add) with
// the group's actual K, then moves to the next group under the ratio
// requested by SetRatio.
func (e *Encoder) close() {
	if e.r > 0 && e.n > 0 {
		e.pMeta = Meta{Kind: KindParity, Group: e.group, Index: uint8(e.n), K: uint8(e.n), R: uint8(e.r)}
		e.pLen, e.pCount, e.pNext = e.maxLen, e.r, 0
	}
	e.group++
	e.n = 0
	if e.k != e.nextK || e.r != e.nextR {
		e.k, e.r = e.nextK, e.nextR
		if e.prepare() != nil {
			e.r = 0
		}
	}
}
