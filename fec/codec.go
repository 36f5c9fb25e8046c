package fec

import (
	"sync"

	"github.com/klauspost/reedsolomon"
)

// The coding matrix is part of the wire format, so it is fixed here rather
// than left to the library's default.
//
// Parity row j, column i is 1/(x_j + y_i)·(x_0 + y_i) over the library's
// GF(2^8), with the elements x_j and y_i of cauchyX and cauchyY: a Cauchy
// matrix (every square submatrix invertible, so any K of the K+R symbols
// recover the group) with columns scaled so the first parity row is all
// ones. Two properties follow that the library's default Vandermonde
// matrix lacks:
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

// cauchyY is column i's element: i for the first LegacyMaxK columns, then
// the elements after the legacy parity rows'. cauchyX is parity row j's:
// LegacyMaxK+j for the first LegacyMaxR rows, then the elements after every
// column's. So a group within the legacy limits has the matrix decoders
// before long groups use (x_j = 64+j, y_i = i), and the MaxK+MaxR elements
// stay distinct, as a Cauchy matrix needs.
func cauchyY(i int) byte {
	if i < LegacyMaxK {
		return byte(i)
	}
	return byte(i + LegacyMaxR)
}

func cauchyX(j int) byte {
	if j < LegacyMaxR {
		return byte(LegacyMaxK + j)
	}
	return byte(MaxK + j)
}

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
			rows[j][i] = coef(j, i)
		}
	}
	return rows
}

// coef is the coding matrix's entry at parity row j, column i.
func coef(j, i int) byte { return coefs[j][i] }

// coefs is the whole coding matrix, made once: a recovery looks up
// (K−e)·e entries.
var coefs = func() (t [MaxR][MaxK]byte) {
	for j := range t {
		for i := range t[j] {
			y := cauchyY(i)
			t[j][i] = gfMul(reedsolomon.Inv(cauchyX(j)^y), cauchyX(0)^y)
		}
	}
	return t
}()

// The library's codecs are safe for concurrent use and, built once, are
// shared by every lane of the process: a codec of MaxK columns holds
// ~100 KiB of tables, too much to keep per lane and R.
var (
	parityMu     sync.Mutex
	parityCodecs [MaxR + 1]reedsolomon.Encoder
	mulAddCodec  = sync.OnceValues(newMulAddCodec)
)

// parityCodec returns the codec whose EncodeIdx folds a data symbol into r
// parity rows: MaxK columns, since EncodeIdx only reads column Index and
// columns do not depend on K, one codec per R serves every K. Made the
// first time a lane of the process needs r rows; one goroutine, since the
// library's worker fan-out would allocate.
func parityCodec(r int) (reedsolomon.Encoder, error) {
	parityMu.Lock()
	defer parityMu.Unlock()
	if enc := parityCodecs[r]; enc != nil {
		return enc, nil
	}
	enc, err := reedsolomon.New(MaxK, r,
		reedsolomon.WithMaxGoroutines(1),
		reedsolomon.WithCustomMatrix(parityRows(MaxK, r)),
		reedsolomon.WithInversionCache(false))
	if err != nil {
		return nil, err
	}
	parityCodecs[r] = enc
	return enc, nil
}

// newMulAddCodec makes the codec mulAdd borrows the library's SIMD
// multiply-add from: one parity row whose column c-1 is c, so EncodeIdx of
// column c-1 adds c times its input to the output.
func newMulAddCodec() (reedsolomon.Encoder, error) {
	row := make([]byte, 255)
	for c := range row {
		row[c] = byte(c + 1)
	}
	return reedsolomon.New(len(row), 1,
		reedsolomon.WithMaxGoroutines(1),
		reedsolomon.WithCustomMatrix([][]byte{row}),
		reedsolomon.WithInversionCache(false))
}

// mulAdder adds c·src to dst over GF(2^8), dst and src of one length, with
// the library's SIMD code. Its one-element slice is what EncodeIdx takes
// as output; kept here, it does not escape to the heap per call.
type mulAdder struct {
	enc reedsolomon.Encoder
	out [1][]byte
}

func (m *mulAdder) mulAdd(dst, src []byte, c byte) {
	if c == 0 {
		return
	}
	m.out[0] = dst
	// Lengths match and c-1 is a column: cannot fail.
	_ = m.enc.EncodeIdx(src, int(c)-1, m.out[:])
	m.out[0] = nil
}

// gfExp and gfLog make scalar products and inverses table lookups for the
// small systems solve inverts (generator 2 of the library's field).
var gfExp, gfLog = func() (exp [510]byte, log [256]byte) {
	x := byte(1)
	for i := range 255 {
		exp[i], exp[i+255] = x, x
		log[x] = byte(i)
		x = gfMul(x, 2)
	}
	return exp, log
}()

func gfMulT(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

func gfInvT(a byte) byte { return gfExp[255-int(gfLog[a])] }

// erasures recovers the lost data symbols of one group from the symbols
// that arrived, without inverting a K×K matrix as the library's
// ReconstructData does for every new loss pattern (at K=192 that
// inversion was ~1.8 ms per group, most of a recovery): for e lost data
// symbols and e parity rows that arrived, each parity row minus what the
// received data contributes to it leaves a sum over the lost symbols alone
// (its syndrome), and the e×e Cauchy submatrix of those rows and columns
// is inverted to solve for them. That costs (K−e)·e multiply-adds of a
// symbol with the library's SIMD code and O(e³) table lookups.
type erasures struct {
	m   mulAdder
	inv [MaxR][MaxR]byte
	a   [MaxR][MaxR]byte

	// The Decoder's scratch of one recovery: the group's symbols by role,
	// the lost data indices and parity rows used, and the slabs the lost
	// data is recovered into (tmp, out).
	data   [MaxK][]byte
	parity [MaxR][]byte
	out    [MaxR][]byte
	lost   [MaxR]uint8
	rows   [MaxR]uint8
	tmp    [MaxR]int16
}

// solve sets out[x] to lost data symbol lost[x] of a group of k data
// symbols: data[i] is data symbol i as sent (length prefix, zero tail; nil
// for the lost), parity[x] the parity symbol of row rows[x]. The parity
// symbols are overwritten (with their syndromes); out must be zeroed and
// as long as the symbols. It reports false only if the system is singular,
// which a Cauchy matrix never is.
func (er *erasures) solve(data [][]byte, lost []uint8, parity [][]byte, rows []uint8, out [][]byte) bool {
	e := len(lost)
	for i, d := range data {
		if d == nil {
			continue
		}
		for x := range e {
			er.m.mulAdd(parity[x], d, coef(int(rows[x]), i))
		}
	}
	for x := range e {
		for y := range e {
			er.a[x][y] = coef(int(rows[x]), int(lost[y]))
			er.inv[x][y] = 0
		}
		er.inv[x][x] = 1
	}
	if !er.invert(e) {
		return false
	}
	for y := range e {
		for x := range e {
			er.m.mulAdd(out[y], parity[x], er.inv[y][x])
		}
	}
	return true
}

// invert turns er.inv into the inverse of er.a's leading e×e block by
// Gauss–Jordan elimination (er.a is destroyed).
func (er *erasures) invert(e int) bool {
	a, inv := &er.a, &er.inv
	for c := range e {
		p := c
		for p < e && a[p][c] == 0 {
			p++
		}
		if p == e {
			return false
		}
		a[c], a[p] = a[p], a[c]
		inv[c], inv[p] = inv[p], inv[c]
		if f := gfInvT(a[c][c]); f != 1 {
			for y := range e {
				a[c][y], inv[c][y] = gfMulT(a[c][y], f), gfMulT(inv[c][y], f)
			}
		}
		for x := range e {
			if f := a[x][c]; x != c && f != 0 {
				for y := range e {
					a[x][y] ^= gfMulT(a[c][y], f)
					inv[x][y] ^= gfMulT(inv[c][y], f)
				}
			}
		}
	}
	return true
}
