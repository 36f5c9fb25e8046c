// Package tcpts keeps packets that FEC recovered from being thrown away by
// the receiving host's PAWS check (RFC 7323), which a TCP receiver applies
// to every segment of a connection that uses timestamps.
//
// Why: a recovered packet reaches the host later than the packets sent
// after it (the rest of its group, then the parity). On its own that is
// harmless: the host moves its ts_recent only with data at its left edge,
// which stops at the hole the recovered packet fills. But once the sender
// retransmits (after a slow start overflowed the bottleneck's queue), a
// retransmission that fills the host's left edge moves ts_recent to the
// time it was sent, and every recovered packet still on its way, sent
// earlier, then fails PAWS and is dropped (nstat PAWSEstab) - without a
// DSACK, so the sender sees real loss, retransmits, cuts its window, and
// the next retransmission does it again. Measured: one CUBIC flow through
// 5% loss and a 200 Mbit/s bottleneck, 50 ms: 4 to 8 window cuts, each
// with PAWS rejections, from 1,338 packets down to 157 (docs/BENCHMARKS.md).
//
// What can move ts_recent past a recovered segment's TSval: only a segment
// taken at the host's left edge while the recovered one's hole was open,
// so one below it in sequence, sent after it - a segment that filled a
// hole (a retransmission), since new data goes out in sequence order. So
// Table keeps, per TCP flow, the highest sequence delivered with the
// TSval of the segment that reached it, and the newest TSval of a filler
// noted within the last fillAge ticks: a segment delivered below the
// highest that was sent no earlier than the one that reached it (a
// retransmission, not an original the path reordered), or one FEC
// recovered below it (which may be a retransmission: it arrives after
// data sent later, so its TSval says nothing; an original taken so only
// matters if the path reorders). Raise writes the filler's TSval into a
// recovered segment whose own is older. A retransmission the host took at its left edge before the
// recovered segment went through the table just before it, so the host's
// ts_recent is no newer and the raised segment passes (one that did not -
// taken before the lane noted, or on another lane - leaves the segment
// as it is, as without the table). Segments delivered in sequence are
// never the raise: a raise to one of them, above a recovered segment,
// would fail a segment the path reordered behind it. A filler's TSval is
// forgotten after fillAge, and a SYN empties its flow's slot: a raise must
// never carry a value from a connection before (a host restarted, a
// 4-tuple reused), which the host could take as its ts_recent and then
// fail every segment of the connection. A SYN FEC recovered empties it
// too.
//
// The sender reads back only the value echoed (TSecr), which then belongs
// to a segment sent later: its timestamp round-trip samples (Linux takes
// them only for acknowledgements of retransmitted data, other stacks from
// every ACK) come out short by the recovery delay, and its check that a
// retransmission was spurious does not fire for such a segment - which
// without Raise would have been dropped.
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
	now   uint32 // ticks (Tick)
}

// fillAge is how many ticks a filler's TSval is raised to (11: it goes
// once more than fillAge passed). The lane ticks its table at least 50
// ms apart, 250 ms while idle, so at least 0.5 s: longer than a group
// stays open for recovery (250 ms), and a retransmission the host took
// before a recovered segment arrived within that.
const fillAge = 10

type slot struct {
	key    flowKey
	high   uint32 // sequence after the highest data delivered
	highTS uint32 // TSval of the segment that moved high last
	fill   uint32 // newest TSval of a filler
	at     uint32 // tick fill was noted at
	used   bool
	filed  bool // fill holds one
}

// flowKey is a flow's direction: version, addresses, ports.
type flowKey struct {
	v6       bool
	src, dst [16]byte
	ports    uint32
}

// seg is what a segment tells the table.
type seg struct {
	key   flowKey
	tcp   int // TCP header's offset in the packet
	tsval int // TSval's offset in the packet
	seq   uint32
	n     uint32 // payload bytes
	flags byte
}

// Tick advances the table's clock, which ages the fillers' TSvals.
func (t *Table) Tick() { t.now++ }

// MaybeTCP reports whether pkt may be TCP, the test a lane makes inline
// before Note or Raise: most of what is not TCP costs it no call.
func MaybeTCP(pkt []byte) bool {
	return len(pkt) >= 40 && (pkt[0]>>4 == 4 && pkt[9] == protoTCP ||
		pkt[0]>>4 == 6 && (pkt[6] == protoTCP || pkt[6] == 0 || pkt[6] == 60))
}

// Note records pkt, a packet delivered as received: its sequence, and its
// TSval if it filled a hole.
func (t *Table) Note(pkt []byte) {
	g, ok := parse(pkt)
	if !ok {
		return
	}
	ts := binary.BigEndian.Uint32(pkt[g.tsval:])
	if g.flags&tcpSYN != 0 {
		t.syn(&g, ts)
		return
	}
	t.slotFor(&g, ts).note(&g, ts, t.now, false)
}

// syn starts g's flow anew: a new connection (or its SYN-ACK's answer).
func (t *Table) syn(g *seg, ts uint32) {
	t.slots[g.key.hash()] = slot{key: g.key, high: g.seq + 1, highTS: ts, used: true}
}

// Raise writes its flow's newest hole-filling TSval into pkt, a packet FEC
// recovered, if pkt's own is older, and fixes the TCP checksum to match.
// It reports whether it changed pkt.
func (t *Table) Raise(pkt []byte) bool {
	g, ok := parse(pkt)
	if !ok {
		return false
	}
	ts := binary.BigEndian.Uint32(pkt[g.tsval:])
	switch {
	case g.flags&tcpSYN != 0:
		t.syn(&g, ts)
		return false
	case g.flags&tcpRST != 0:
		return false
	}
	s := t.slotFor(&g, ts)
	if !s.filed || t.now-s.at > fillAge || !newer(s.fill, ts) {
		s.note(&g, ts, t.now, true)
		return false
	}
	setTSval(pkt, g, s.fill)
	s.note(&g, s.fill, t.now, true)
	return true
}

// slotFor is g's flow's slot, taken over (emptied, from g, TSval ts) if
// another flow had it.
func (t *Table) slotFor(g *seg, ts uint32) *slot {
	s := &t.slots[g.key.hash()]
	if !s.used || s.key != g.key {
		*s = slot{key: g.key, high: g.seq, highTS: ts, used: true}
	}
	return s
}

// note takes segment g, with TSval ts as delivered at tick now (recovered
// by FEC or not), into s.
func (s *slot) note(g *seg, ts, now uint32, recovered bool) {
	if g.n == 0 {
		return // no data: neither fills a hole nor moves the sequence
	}
	// Below high, and recovered or sent no earlier than the segment that
	// reached high: a filler (see the package comment).
	if before(g.seq, s.high) && (recovered || !newer(s.highTS, ts)) && (!s.filed || now-s.at > fillAge || newer(ts, s.fill)) {
		s.fill, s.at, s.filed = ts, now, true
	}
	if end := g.seq + g.n; before(s.high, end) {
		s.high, s.highTS = end, ts
	}
}

// newer reports whether TSval a is after b, and before whether sequence a
// is before b, in serial arithmetic (RFC 7323 and RFC 9293 compare modulo
// 2^32).
func newer(a, b uint32) bool  { return int32(a-b) > 0 }
func before(a, b uint32) bool { return int32(a-b) < 0 }

// hash picks key's slot from the low address bytes and the ports; every
// flow of a lane shares the peer's prefixes, so the high bytes say little.
func (k *flowKey) hash() int {
	h := binary.BigEndian.Uint32(k.src[12:])*0x9e3779b1 ^
		binary.BigEndian.Uint32(k.dst[12:])*0x85ebca77 ^
		k.ports*0xc2b2ae3d
	return int(h>>26) & (Size - 1)
}
