package shard

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/yip-router/yip-router/crypto"
)

// WireLens is a sample of the wire lengths of the data datagrams recently
// exchanged with one peer (sent and received, unpadded), over all its
// lanes, for the control plane to draw its handshake messages' lengths from
// (it is a crypto.WireLengths). The lanes' shards add to it when they
// publish (Shard.publish, with every tick: the lengths each lane saw since,
// from its sizes ring), never per packet; the control plane reads it from
// any goroutine. Atomics only, no lock. Each draw adds a fresh pad as the
// lanes' padding would (the shards record their Padding with the
// lengths), so handshakes drawn while the sample stands still (an idle
// peer) do not repeat its few lengths.
type WireLens struct {
	next  atomic.Uint32 // writes so far; slot next%len(slots) is the oldest
	slots [wireLensN]atomic.Uint32
	// pad is the padding of the lanes that publish (mode in the low
	// byte, MaxWire above), 0 while they send unpadded.
	pad atomic.Uint32
	// long: the peer's lanes announce FeatureLongHandshakes.
	long atomic.Bool
}

// LongHandshakes reports whether the peer said it reads long handshake
// datagrams (crypto.LongHandshakes).
func (w *WireLens) LongHandshakes() bool { return w.long.Load() }

// SetLong records whether the peer reads long handshakes: a lane sets it
// from each keepalive of the peer's (its features), and the control plane
// clears it before it retries an initiation, in case the peer now runs a
// router that does not (a long initiation would never be answered) — until
// a keepalive says so again. A nil WireLens ignores it.
func (w *WireLens) SetLong(v bool) {
	if w != nil && w.long.Load() != v {
		w.long.Store(v)
	}
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

// Draw returns one of the sampled lengths as sampled (unpadded), or false
// if nothing was published yet: what the peer's control frames are padded
// to, before their own padding.
func (w *WireLens) Draw() (int, bool) {
	k := min(int(w.next.Load()), wireLensN)
	if k == 0 {
		return 0, false
	}
	i := rand.IntN(k)
	for range k {
		// 0: a slot claimed but not yet written (a concurrent add).
		if n := int(w.slots[i].Load()); n != 0 {
			return n, true
		}
		i = (i + 1) % k
	}
	return 0, false
}

// DrawLen returns one of the sampled lengths, padded afresh, that lies in
// [lo, hi], each sample equally likely, or false if none does (or nothing
// was sent yet).
func (w *WireLens) DrawLen(lo, hi int) (int, bool) {
	k := min(int(w.next.Load()), wireLensN)
	pv := w.pad.Load()
	pad := Padding{Mode: PadMode(pv & 0xff), MaxWire: int(pv >> 8)}
	var ok [wireLensN]int
	m := 0
	for i := range k {
		// 0: a slot claimed but not yet written (a concurrent add).
		n := int(w.slots[i].Load())
		if n == 0 {
			continue
		}
		if n += pad.pad(rand.Uint32(), n); n >= lo && n <= hi {
			ok[m] = n
			m++
		}
	}
	if m == 0 {
		return 0, false
	}
	return ok[rand.IntN(m)], true
}

var (
	_ crypto.WireLengths    = (*WireLens)(nil)
	_ crypto.LongHandshakes = (*WireLens)(nil)
)

// publishSizes adds the wire lengths (unpadded) of the data datagrams ln
// saw since its last publication (at most its sizes ring) to w, and the
// padding ln's datagrams get.
func (s *Shard) publishSizes(ln *lane, w *WireLens) {
	n := min(ln.sizeN-ln.sizePub, uint32(len(ln.sizes)))
	m := s.cfg.Padding.maxInner()
	for i := ln.sizeN - n; i != ln.sizeN; i++ {
		inner := int(ln.sizes[i%uint32(len(ln.sizes))])
		if m > 0 {
			// A length the peer sent us may exceed our own MTU.
			inner = min(inner, m)
		}
		w.Add(inner + crypto.DataOverhead)
	}
	ln.sizePub = ln.sizeN
	var pv uint32
	if p := s.cfg.Padding; p.Mode != PadOff && ln.padded() {
		pv = uint32(p.Mode) | uint32(p.MaxWire)<<8
	}
	if w.pad.Load() != pv {
		w.pad.Store(pv)
	}
}
