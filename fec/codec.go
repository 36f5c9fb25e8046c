package fec

import "github.com/klauspost/reedsolomon"

// The coding matrix is part of the wire format, so it is fixed here rather
// than left to the library's default.
//
// Parity row j, column i is 1/(x_j + y_i)·(x_0 + y_i) over the library's
// GF(2^8), with x_j = MaxK+j and y_i = i: a Cauchy matrix (every square
// submatrix invertible, so any K of the K+R symbols recover the group) with
// columns scaled so the first parity row is all ones. Two properties follow
// that the library's default Vandermonde matrix lacks:
//
//   - An entry depends only on its row and column, never on K, so parity
//     accumulated symbol by symbol under the K in force is already the
//     parity of a group flushed early at a smaller K. The encoder can
//     therefore fold each symbol into parity as it is sent (EncodeIdx: no
//     copy of the symbol, no work at group close, and—unlike Encode, whose
//     SIMD code generators allocate per call—no allocation).
//   - The first parity symbol is a plain XOR, which is what
//     WithFastOneParityMatrix buys for R=1 (see the benchmarks), here for
//     every R.

// gfMul multiplies in GF(2^8) with the library's polynomial x⁸+x⁴+x³+x²+1
// (0x11d); TestFieldMatchesLibrary pins that against reedsolomon.Inv.
func gfMul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1d
		}
		b >>= 1
	}
	return p
}

// parityRows returns the R×K parity part of the coding matrix.
func parityRows(k, r int) [][]byte {
	rows := make([][]byte, r)
	for j := range rows {
		rows[j] = make([]byte, k)
		for i := range k {
			y := byte(i)
			rows[j][i] = gfMul(reedsolomon.Inv(byte(MaxK+j)^y), byte(MaxK)^y)
		}
	}
	return rows
}

// codecCacheSize is how many (K,R) codecs one decoder keeps. A partial group
// has its own K, so a lane at low rate cycles through several; 16 covers a
// steady ratio plus its flushes without churn, while a hostile peer cycling
// through all 2048 pairs only causes evictions, never retained growth.
const codecCacheSize = 16

// inversionCacheBudget bounds the library's per-codec cache of inverted
// decode matrices. Inverting per recovery costs dozens of allocations and
// several µs at K=16, so the cache is worth keeping—but it is keyed by loss
// pattern and never shrinks, so a peer choosing its losses could grow it
// without limit. Each recovery adds at most one entry; a codec is therefore
// replaced (cache and all) after as many recoveries as fit the budget.
const inversionCacheBudget = 256 << 10

// newCodec is the only place a decoding reedsolomon.Encoder is made, so both
// ends use the same matrix. One goroutine: lanes already run one per core,
// and the library's worker fan-out would allocate.
func newCodec(k, r int) (reedsolomon.Encoder, error) {
	return reedsolomon.New(k, r,
		reedsolomon.WithMaxGoroutines(1),
		reedsolomon.WithCustomMatrix(parityRows(k, r)),
	)
}

// recoveriesPerCodec is how many recoveries (so inversion-cache entries) a
// K:R codec may see before it is replaced: an entry holds a K×K matrix as
// K rows and up to R tree nodes of K+R child pointers each.
func recoveriesPerCodec(k, r int) int {
	entry := k*k + 24*k + r*(8*(k+r)+48)
	return max(1, inversionCacheBudget/entry)
}

type codecEntry struct {
	k, r      uint8
	used      uint64
	recovered int
	enc       reedsolomon.Encoder
}

// codecCache is a tiny LRU of codecs. A linear scan over 16 entries is
// cheaper than hashing and allocates nothing.
type codecCache struct {
	clock uint64
	ents  [codecCacheSize]codecEntry
}

// empty reports whether no codec is cached.
func (c *codecCache) empty() bool {
	for i := range c.ents {
		if c.ents[i].enc != nil {
			return false
		}
	}
	return true
}

// forRecovery returns the K:R codec for one more recovery, replacing it
// first if its inversion cache may have reached the budget.
func (c *codecCache) forRecovery(k, r int) (reedsolomon.Encoder, error) {
	e, err := c.entry(k, r)
	if err != nil {
		return nil, err
	}
	if e.recovered >= recoveriesPerCodec(k, r) {
		if e.enc, err = newCodec(k, r); err != nil {
			e.enc = nil
			return nil, err
		}
		e.recovered = 0
	}
	e.recovered++
	return e.enc, nil
}

func (c *codecCache) entry(k, r int) (*codecEntry, error) {
	c.clock++
	victim := 0
	for i := range c.ents {
		e := &c.ents[i]
		if e.enc != nil && int(e.k) == k && int(e.r) == r {
			e.used = c.clock
			return e, nil
		}
		if e.used < c.ents[victim].used {
			victim = i
		}
	}
	enc, err := newCodec(k, r)
	if err != nil {
		return nil, err
	}
	c.ents[victim] = codecEntry{k: uint8(k), r: uint8(r), used: c.clock, enc: enc}
	return &c.ents[victim], nil
}
