package shard

import (
	"math/rand/v2"

	"github.com/yip-router/yip-router/crypto"
)

// The lengths control frames are padded to (control.go's frame format):
// drawn from the data packets the lane and its peer send.

// Control-frame lengths when the lane has sent no data yet: small packets
// (TCP ACKs and handshakes of the inner flows are 40..120 bytes).
const padMinDefault, padMaxDefault = 40, 120

// sizeEvery is how many packets a full sizes ring samples one of.
const sizeEvery = 8

// noteSize records the length of an inner packet ln sends or receives, for
// padLen: every packet until the ring is full, then one in sizeEvery at
// random. On the data path: a few shifts, no allocation.
func (ln *lane) noteSize(n int) {
	// From the network: a peer (or FEC) may send symbols shorter than a
	// sealed packet; they say nothing about data lengths.
	n = min(n, MaxInner)
	if n <= 0 {
		return
	}
	if ln.sizeN >= uint32(len(ln.sizes)) {
		x := ln.sizeRand
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		ln.sizeRand = x
		if x%sizeEvery != 0 {
			return
		}
	}
	ln.sizes[ln.sizeN%uint32(len(ln.sizes))] = uint16(n)
	ln.sizeN++
}

// padLen is the plaintext length a control frame on ln is padded to: the
// length of one of the peer's recent data packets (over all its lanes,
// both directions: cfg.Lens), or of the lane's own before its shard has
// published any, picked at random, so control datagrams are as long as
// data datagrams are. The peer's, because its lanes often carry different
// traffic (one a bulk flow, another only pings), and frames drawn from an
// idle lane's few small packets would stand out among the bulk flow's.
func (ln *lane) padLen() int {
	if ln.cfg.Lens != nil {
		if n, ok := ln.cfg.Lens.Draw(); ok {
			return n - crypto.DataOverhead
		}
	}
	n := min(int(ln.sizeN), len(ln.sizes))
	if n == 0 {
		return padMinDefault + rand.IntN(padMaxDefault-padMinDefault+1)
	}
	return int(ln.sizes[rand.IntN(n)])
}
