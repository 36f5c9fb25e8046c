// Package tcpts keeps packets that FEC recovered from being thrown away by
// the receiving host's PAWS check (RFC 7323), which a TCP receiver applies
// to every segment of a connection that uses timestamps.
//
// Why: a recovered packet reaches the host later than the packets sent
// after it (the rest of its group, then the parity). On its own that is
// harmless: the host moves its ts_recent only with in-order data, which
// stops at the hole the recovered packet fills. But once the sender
// retransmits anything (after a slow start overflowed the bottleneck's
// queue), a retransmission that fills the host's left edge moves ts_recent
// to the time it was sent, and every recovered packet still on its way,
// sent earlier, then fails PAWS and is dropped (nstat PAWSEstab) - without
// a DSACK, so the sender sees real loss, retransmits, cuts its window, and
// the next retransmission does it again. Measured: one CUBIC flow through
// 5% loss and a 200 Mbit/s bottleneck, 50 ms: 4 to 8 window cuts, each
// with PAWS rejections, from 1,338 packets down to 157 (docs/BENCHMARKS.md).
//
// Table remembers, per TCP flow, the newest timestamp value (TSval) the
// router delivered to its host; Raise writes it into a recovered segment
// whose own is older. The host's ts_recent is the TSval of a segment it
// took, so never newer than that: the raised segment passes PAWS. The
// sender reads back only the value echoed to it (TSecr), which then
// belongs to a segment sent later: its timestamp round-trip samples, used
// only for acknowledgements of retransmitted data, come out short by the
// recovery delay, and its check that a retransmission was spurious does
// not fire for such a packet - where without Raise the packet would have
// been dropped.
package tcpts

import "encoding/binary"

// Size is the flows a Table remembers: direct-mapped, a flow that hashes
// to a taken slot replaces the one there (which then loses only the
// raising, not correctness: a key that does not match is never used).
const Size = 64

// Table is one lane's flows. The zero value is empty and ready. Not safe
// for concurrent use (one lane, one shard).
type Table struct {
	slots [Size]slot
}

type slot struct {
	key  flowKey
	ts   uint32
	used bool
}

// flowKey is a flow's direction: version, addresses, ports.
type flowKey struct {
	v6       bool
	src, dst [16]byte
	ports    uint32
}

// tsOpt is where a segment's TSval is.
type tsOpt struct {
	key   flowKey
	tcp   int // TCP header's offset in the packet
	tsval int // TSval's offset in the packet
}

// Note records pkt, a packet delivered as received, as its flow's newest
// TSval if it is one.
func (t *Table) Note(pkt []byte) {
	o, ok := parse(pkt)
	if !ok {
		return
	}
	ts := binary.BigEndian.Uint32(pkt[o.tsval:])
	s := &t.slots[o.key.hash()]
	if !s.used || s.key != o.key || newer(ts, s.ts) {
		*s = slot{key: o.key, ts: ts, used: true}
	}
}

// Raise writes its flow's newest TSval into pkt, a packet FEC recovered,
// if pkt's own is older, and fixes the TCP checksum to match. It reports
// whether it changed pkt. A segment newer than the flow's newest is noted.
func (t *Table) Raise(pkt []byte) bool {
	o, ok := parse(pkt)
	if !ok {
		return false
	}
	ts := binary.BigEndian.Uint32(pkt[o.tsval:])
	s := &t.slots[o.key.hash()]
	if !s.used || s.key != o.key || !newer(s.ts, ts) {
		if !s.used || s.key != o.key || newer(ts, s.ts) {
			*s = slot{key: o.key, ts: ts, used: true}
		}
		return false
	}
	setTSval(pkt, o, s.ts)
	return true
}

// newer reports whether TSval a is after b in serial arithmetic (RFC 7323
// compares timestamps modulo 2^32).
func newer(a, b uint32) bool { return int32(a-b) > 0 }

// hash picks key's slot from the low address bytes and the ports; every
// flow of a lane shares the peer's prefixes, so the high bytes say little.
func (k *flowKey) hash() int {
	h := binary.BigEndian.Uint32(k.src[12:])*0x9e3779b1 ^
		binary.BigEndian.Uint32(k.dst[12:])*0x85ebca77 ^
		k.ports*0xc2b2ae3d
	return int(h>>26) & (Size - 1)
}
