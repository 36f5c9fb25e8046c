package fec

import "math/bits"

// indexSet is a set of one group's symbol indices (data 0..K-1, parity
// K..K+R-1, below MaxK+MaxR): which arrived, which were handed out. A
// value type of fixed size, so a slot holds it without a pointer.
type indexSet [(MaxK + MaxR + 63) / 64]uint64

func (s *indexSet) has(i int) bool { return s[i>>6]&(1<<(i&63)) != 0 }
func (s *indexSet) add(i int)      { s[i>>6] |= 1 << (i & 63) }
func (s *indexSet) remove(i int)   { s[i>>6] &^= 1 << (i & 63) }

// lowWord is word w of the set {0..n-1}.
func lowWord(n, w int) uint64 {
	switch m := n - 64*w; {
	case m >= 64:
		return ^uint64(0)
	case m <= 0:
		return 0
	default:
		return 1<<m - 1
	}
}

// countBelow is how many indices below n the set holds.
func (s *indexSet) countBelow(n int) int {
	c := 0
	for w := range s {
		c += bits.OnesCount64(s[w] & lowWord(n, w))
	}
	return c
}

// count is how many indices the set holds.
func (s *indexSet) count() int { return s.countBelow(MaxK + MaxR) }

// allBelow reports whether the set holds every index below n and no other.
func (s *indexSet) allBelow(n int) bool {
	for w := range s {
		if s[w] != lowWord(n, w) {
			return false
		}
	}
	return true
}

// runsMissingBelow counts the runs of indices below n the set lacks: a
// group's symbols go out in index order, so these are its loss bursts.
func (s *indexSet) runsMissingBelow(n int) int {
	runs := 0
	var carry uint64 // whether the index before this word's first is missing
	for w := range s {
		m := ^s[w] & lowWord(n, w)
		// A run starts at a missing index whose predecessor arrived.
		runs += bits.OnesCount64(m &^ (m<<1 | carry))
		carry = m >> 63
	}
	return runs
}
