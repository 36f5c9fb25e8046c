package fec

import (
	"bytes"
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
		enc, err := newCodec(7, r)
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

// TestCodecReplacedAfterBudget: the inversion cache cannot grow past its
// budget because the codec holding it is replaced.
func TestCodecReplacedAfterBudget(t *testing.T) {
	var c codecCache
	limit := recoveriesPerCodec(MaxK, MaxR)
	if limit < 1 || limit*(MaxK*MaxK) > inversionCacheBudget {
		t.Fatalf("limit %d does not respect the budget", limit)
	}
	first, _ := c.forRecovery(MaxK, MaxR)
	for range limit - 1 {
		if enc, _ := c.forRecovery(MaxK, MaxR); enc != first {
			t.Fatal("codec replaced before its budget")
		}
	}
	if enc, _ := c.forRecovery(MaxK, MaxR); enc == first {
		t.Fatal("codec not replaced after its budget")
	}
}
