// Reconstruction of a group's missing data from its parity, what a
// reconstruction the deliverer refuses costs (spoiled), and the arena of
// fixed-size slabs that holds the symbols kept for it within the byte cap.

package fec

import "encoding/binary"

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
		if b := s.buf(i); b >= 0 {
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
		if b := s.buf(k + j); b >= 0 {
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
		if !deliver(b[lenPrefix:lenPrefix+n], true) {
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
		if s.buf(j) >= 0 {
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
	s.setBuf(idx, b)
	s.nStored++
	return b
}

// unstore releases the copy of symbol idx of s, if one was kept.
func (d *Decoder) unstore(s *slot, idx int) {
	if b := s.buf(idx); b >= 0 {
		d.free = append(d.free, b)
		s.bufs[idx] = 0
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
		if d.free == nil {
			// Every slab taken can come back: room for all of them
			// now, so freeing one never allocates.
			d.free = make([]int16, 0, d.maxSlabs)
		}
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

// buf is the arena slab holding symbol idx of s; -1 if none.
func (s *slot) buf(idx int) int16 { return s.bufs[idx] - 1 }

// setBuf records that slab b holds symbol idx of s.
func (s *slot) setBuf(idx int, b int16) { s.bufs[idx] = b + 1 }

func (d *Decoder) freeBufs(s *slot) {
	if s.nStored == 0 {
		return
	}
	for i, b := range s.bufs {
		if b > 0 {
			d.free = append(d.free, b-1)
			s.bufs[i] = 0
		}
	}
	s.nStored = 0
}
