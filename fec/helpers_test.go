package fec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// wireSym is one symbol as the framing layer would carry it.
type wireSym struct {
	m Meta
	b []byte
}

// payload makes a self-identifying data symbol: group and index up front so
// a delivery can be matched to what was sent, random bytes after.
func payload(rng *rand.Rand, seq uint64, n int) []byte {
	n = max(n, 8)
	b := make([]byte, n)
	binary.BigEndian.PutUint64(b, seq)
	for i := 8; i < n; i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// emitGroup feeds syms to e as one group (flushing if it is short) and
// returns everything that goes on the wire, copying parity out of the arena.
func emitGroup(t testing.TB, e *Encoder, syms [][]byte, now time.Time) []wireSym {
	t.Helper()
	var out []wireSym
	for _, s := range syms {
		m, err := e.Add(s, now)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, wireSym{m, s})
		out = drainParity(e, out)
	}
	if _, r := e.Ratio(); r > 0 && len(out) > 0 && out[len(out)-1].m.Kind == KindData {
		e.Flush()
		out = drainParity(e, out)
	}
	return out
}

func drainParity(e *Encoder, out []wireSym) []wireSym {
	for {
		m, p, ok := e.NextParity()
		if !ok {
			return out
		}
		out = append(out, wireSym{m, bytes.Clone(p)})
	}
}

// sink records deliveries and fails on duplicates or corrupted bytes. With
// authenticate set it refuses bytes that differ from what was sent, as the
// shard's AEAD open does, and counts them in refused.
type sink struct {
	t            testing.TB
	sent         map[uint64][]byte
	got          map[uint64]int
	authenticate bool
	refused      int
}

func newSink(t testing.TB) *sink {
	return &sink{t: t, sent: map[uint64][]byte{}, got: map[uint64]int{}}
}

func (s *sink) expect(b []byte) { s.sent[binary.BigEndian.Uint64(b)] = b }

func (s *sink) deliver(b []byte, _ bool) bool {
	s.t.Helper()
	if s.authenticate {
		if want, ok := s.sent[binary.BigEndian.Uint64(b[:min(len(b), 8)])]; len(b) < 8 || !ok || !bytes.Equal(b, want) {
			s.refused++
			return false
		}
	}
	if len(b) < 8 {
		s.t.Fatalf("delivered %d bytes, shorter than any sent symbol", len(b))
	}
	id := binary.BigEndian.Uint64(b)
	want, ok := s.sent[id]
	if !ok {
		s.t.Fatalf("delivered unknown symbol id %d", id)
	}
	if !bytes.Equal(b, want) {
		s.t.Fatalf("symbol %d: delivered bytes differ from sent (len %d vs %d)", id, len(b), len(want))
	}
	s.got[id]++
	if s.got[id] > 1 {
		s.t.Fatalf("symbol %d delivered %d times", id, s.got[id])
	}
	return true
}

func (s *sink) has(b []byte) bool { return s.got[binary.BigEndian.Uint64(b)] > 0 }

func ratioName(k, r int) string { return fmt.Sprintf("%d:%d", k, r) }

// all fails unless every expected symbol was delivered.
func (s *sink) all() {
	s.t.Helper()
	for id := range s.sent {
		if s.got[id] == 0 {
			s.t.Fatalf("symbol %d never delivered", id)
		}
	}
}
