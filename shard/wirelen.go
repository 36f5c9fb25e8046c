package shard

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/yip-router/yip-router/crypto"
)

// WireLens is a sample of the wire lengths of the data datagrams recently
// sent to one peer, over all its lanes, for the control plane to draw its
// handshake messages' lengths from (it is a crypto.WireLengths). The lanes'
// shards add to it when they publish (Shard.publish, with every tick: the
// lengths each lane sent since, from its sizes ring), never per packet; the
// control plane reads it from any goroutine. Atomics only, no lock.
type WireLens struct {
	next  atomic.Uint32 // writes so far; slot next%len(slots) is the oldest
	slots [wireLensN]atomic.Uint32
}

// wireLensN is how many recent lengths a peer's sample keeps: two lanes'
// sizes rings.
const wireLensN = 32

// Add records the wire length of one datagram sent to the peer (the
// lanes call it when their shard publishes).
func (w *WireLens) Add(n int) {
	i := w.next.Add(1) - 1
	w.slots[i%wireLensN].Store(uint32(n))
}

// DrawLen returns one of the sampled lengths in [lo, hi], each sample
// equally likely, or false if none lies there (or nothing was sent yet).
func (w *WireLens) DrawLen(lo, hi int) (int, bool) {
	k := min(int(w.next.Load()), wireLensN)
	var ok [wireLensN]int
	m := 0
	for i := range k {
		// 0: a slot claimed but not yet written (a concurrent add).
		if n := int(w.slots[i].Load()); n != 0 && n >= lo && n <= hi {
			ok[m] = n
			m++
		}
	}
	if m == 0 {
		return 0, false
	}
	return ok[rand.IntN(m)], true
}

var _ crypto.WireLengths = (*WireLens)(nil)

// publishSizes adds the wire lengths of the data datagrams ln sent since
// its last publication (at most its sizes ring) to w, each with a pad
// drawn as padFor would draw one, so handshakes take after padded data too.
func (s *Shard) publishSizes(ln *lane, w *WireLens) {
	n := min(ln.sizeN-ln.sizePub, uint32(len(ln.sizes)))
	for i := ln.sizeN - n; i != ln.sizeN; i++ {
		wire := int(ln.sizes[i%uint32(len(ln.sizes))]) + crypto.DataOverhead
		w.Add(wire + s.padLength(ln, wire))
	}
	ln.sizePub = ln.sizeN
}
