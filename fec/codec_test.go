package fec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/reedsolomon"
)

// TestFieldMatchesLibrary pins gfMul to the library's field: if the
// polynomial differed, parityRows would not be the Cauchy matrix it claims
// and recovery would fail for some patterns.
func TestFieldMatchesLibrary(t *testing.T) {
	for a := 1; a < 256; a++ {
		if p := gfMul(byte(a), reedsolomon.Inv(byte(a))); p != 1 {
			t.Fatalf("a=%d: a·Inv(a) = %d", a, p)
		}
	}
	for _, row := range parityRows(MaxK, MaxR) {
		for i, v := range row {
			if v == 0 {
				t.Fatalf("zero matrix entry in column %d", i)
			}
		}
	}
	for i, v := range parityRows(MaxK, 1)[0] {
		if v != 1 {
			t.Fatalf("first parity row is not XOR at column %d: %d", i, v)
		}
	}
}

// TestLegacyMatrix: a group within the legacy limits is coded with the
// matrix decoders before long groups use (x_j = 64+j, y_i = i), so a peer
// that does not read long groups still decodes what it is sent; and the
// elements of the long matrix are distinct, as a Cauchy matrix needs.
func TestLegacyMatrix(t *testing.T) {
	rows := parityRows(LegacyMaxK, LegacyMaxR)
	for j := range LegacyMaxR {
		for i := range LegacyMaxK {
			y := byte(i)
			if want := gfMul(reedsolomon.Inv(byte(64+j)^y), byte(64)^y); rows[j][i] != want {
				t.Fatalf("row %d column %d: %d, legacy decoders use %d", j, i, rows[j][i], want)
			}
		}
	}
	seen := map[byte]string{}
	for i := range MaxK {
		if o, ok := seen[cauchyY(i)]; ok {
			t.Fatalf("column %d's element is %s's", i, o)
		}
		seen[cauchyY(i)] = fmt.Sprintf("column %d", i)
	}
	for j := range MaxR {
		if o, ok := seen[cauchyX(j)]; ok {
			t.Fatalf("row %d's element is %s's", j, o)
		}
		seen[cauchyX(j)] = fmt.Sprintf("row %d", j)
	}
}

// TestIncrementalParityIsPrefixStable: parity folded in symbol by symbol
// under a large K and closed early equals the library's Encode at the
// smaller K—what lets a flushed group be decoded with its actual K.
func TestIncrementalParityIsPrefixStable(t *testing.T) {
	for _, r := range []int{1, 2, 5} {
		e, _ := NewEncoder(EncoderConfig{K: 40, R: r})
		shards := make([][]byte, 7+r)
		for i := range 7 {
			sym := bytes.Repeat([]byte{byte(i*37 + 1)}, 10+i*13)
			e.Add(sym, t0)
			shards[i] = make([]byte, 2+10+6*13)
			shards[i][1] = byte(len(sym))
			copy(shards[i][2:], sym)
		}
		e.Flush()
		enc, err := reedsolomon.New(7, r, reedsolomon.WithCustomMatrix(parityRows(7, r)))
		if err != nil {
			t.Fatal(err)
		}
		for j := range r {
			shards[7+j] = make([]byte, len(shards[0]))
		}
		if err := enc.Encode(shards); err != nil {
			t.Fatal(err)
		}
		for j := range r {
			m, p, ok := e.NextParity()
			if !ok || m.K != 7 || !bytes.Equal(p, shards[7+j]) {
				t.Fatalf("R=%d parity %d (%+v) differs from Encode at K=7", r, j, m)
			}
		}
	}
}

// TestErasuresMatchLibrary: the solver recovers what the library's
// ReconstructData recovers from the same symbols, for legacy and long
// groups and any pattern of lost data and arriving parity.
func TestErasuresMatchLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	enc, err := mulAddCodec()
	if err != nil {
		t.Fatal(err)
	}
	er := &erasures{m: mulAdder{enc: enc}}
	for _, kr := range [][2]int{{1, 1}, {5, 3}, {LegacyMaxK, LegacyMaxR}, {100, 40}, {MaxK, MaxR}} {
		k, r := kr[0], kr[1]
		lib, err := reedsolomon.New(k, r, reedsolomon.WithCustomMatrix(parityRows(k, r)))
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			size := 1 + rng.IntN(300)
			shards := make([][]byte, k+r)
			for i := range shards {
				shards[i] = make([]byte, size)
				if i < k {
					for x := range shards[i] {
						shards[i][x] = byte(rng.Uint32())
					}
				}
			}
			if err := lib.Encode(shards); err != nil {
				t.Fatal(err)
			}
			e := 1 + rng.IntN(min(k, r))
			lostIdx := rng.Perm(k)[:e]
			rowIdx := rng.Perm(r)[:e]
			data := make([][]byte, k)
			for i := range k {
				data[i] = bytes.Clone(shards[i])
			}
			var lost, rows []uint8
			var parity, out [][]byte
			for x := range e {
				data[lostIdx[x]] = nil
				lost = append(lost, uint8(lostIdx[x]))
				rows = append(rows, uint8(rowIdx[x]))
				parity = append(parity, bytes.Clone(shards[k+rowIdx[x]]))
				out = append(out, make([]byte, size))
			}
			if !er.solve(data, lost, parity, rows, out) {
				t.Fatalf("%d:%d: singular", k, r)
			}
			for x, i := range lost {
				if !bytes.Equal(out[x], shards[i]) {
					t.Fatalf("%d:%d: data %d (of %d lost, parity rows %v) recovered wrong", k, r, i, e, rows)
				}
			}
		}
	}
}
