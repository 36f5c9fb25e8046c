package shard

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// FuzzShardIngress drives two shards' ingress (B, two lanes of a session
// with A, one per shard) with hostile datagrams that are nonetheless
// authenticated: the fuzzer plays a peer that holds A's real lane keys, so
// every datagram it makes passes the SipHash tag and reaches the FEC
// decoder, the AEAD and the control parser. Genuine traffic both ways,
// loss reports, replays, rekeys and time are mixed in. It checks:
//
//   - no panic;
//   - no buffer leak: between operations and at the end (after every timer
//     has run) each shard's pool is full again, less the packets waiting
//     for a handshake (none here; receive buffers are the shard's own, not
//     the pool's), and nothing is left staged;
//   - every lane decoder's storage stays within its cap;
//   - what reaches TUN was sealed by the sender, at most once per sealing;
//   - the shards are not wedged: after a time advance past every expiry,
//     genuine packets from a sender that continues after what the decoder
//     last accepted are all delivered, both ways.
//
// The input is a sequence of operations (see ingressFuzz.step); bytes past
// its end read as zero.
func FuzzShardIngress(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newIngressFuzz(t, &fuzzIn{b: in})
		for ops := 0; len(h.in.b) > 0 && ops < ingressMaxOps; ops++ {
			h.step()
			h.check("after op")
		}
		h.finish()
	})
}

const (
	ingressMaxOps    = 96
	ingressMaxRekeys = 2
	ingressPool      = 128 // per shard: small, so a leak shows at once
	ingressHistory   = 32
)

type fuzzIn struct{ b []byte }

func (r *fuzzIn) u8() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *fuzzIn) u16() int { return int(r.u8())<<8 | int(r.u8()) }

// hostDgram is an A→B datagram kept for replays.
type hostDgram struct {
	lane int
	data []byte
}

type ingressFuzz struct {
	t      *testing.T
	in     *fuzzIn
	a, b   *side
	epoch  int
	fc     fec.EncoderConfig
	win    fec.DecoderConfig
	now    time.Time
	cursor [2]uint32 // hostile group cursor per lane

	// Plaintexts sealed per direction and not yet seen on TUN.
	sealedAB, sealedBA map[string]int
	seenB, seenA       [2]int // TUN packets already checked

	history []hostDgram
	scratch [4096]byte
	pt      [4096]byte
	rx      [4096]byte
	seq     uint32
	rng     uint64
}

var ingressT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newIngressFuzz(t *testing.T, in *fuzzIn) *ingressFuzz {
	h := &ingressFuzz{
		t: t, in: in, now: ingressT0,
		a: newSidePool(t, 2, routesA, ingressPool), b: newSidePool(t, 2, routesB, ingressPool),
		sealedAB: map[string]int{}, sealedBA: map[string]int{},
	}
	// First byte: the session's FEC ratio and B's decoder bounds: the
	// defaults, or bounds so tight that far-ahead drops, expiry or
	// eviction under the byte cap are the rule.
	c := in.u8()
	h.fc = fec.EncoderConfig{K: 1 + int(c&7), R: int(c>>3) & 3}
	switch c >> 5 & 3 {
	case 1:
		h.win = fec.DecoderConfig{MaxGroups: 2, MaxBytes: 1, MaxAhead: 1, GroupTTL: 20 * time.Millisecond}
	case 2:
		h.win = fec.DecoderConfig{MaxGroups: 8, MaxBytes: 1}
	case 3:
		h.win = fec.DecoderConfig{MaxGroups: 64, MaxBytes: 64 << 10, MaxAhead: 200}
	}
	for _, sd := range []*side{h.a, h.b} {
		for _, s := range sd.shards {
			s.now = h.now
		}
	}
	h.connect(false)
	return h
}

// laneAddr is A's address for lane i (as connect uses).
func laneAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(addrA.Addr(), addrA.Port()+uint16(i))
}

// connect installs (or rekeys) the two-lane session with keys that depend
// only on the epoch, so a failing input replays exactly. Both sides adapt
// R to loss reports.
func (h *ingressFuzz) connect(holdB bool) {
	t := h.t
	k1, k2 := [32]byte{1, byte(h.epoch)}, [32]byte{2, byte(h.epoch)}
	ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
	const lanes = 2
	for i := range lanes {
		for _, x := range []struct {
			sd     *side
			keys   crypto.SessionKeys
			peer   PeerID
			remote netip.AddrPort
			win    fec.DecoderConfig
		}{{h.a, ka, 2, addrB, fec.DecoderConfig{}}, {h.b, kb, 1, laneAddr(i), h.win}} {
			if err := x.sd.shards[i].InstallLane(LaneConfig{
				Peer: x.peer, Index: i, Lanes: lanes, Remote: x.remote, Conn: 0,
				Send: x.keys.SendLane(i), Recv: x.keys.RecvLane(i), FEC: h.fc, Window: x.win,
				HoldTx: holdB && x.sd == h.b, Mode: fec.Mode{Kind: fec.ModeAuto},
			}); err != nil {
				t.Fatal(err)
			}
			for j, s := range x.sd.shards {
				if j != i {
					recv := x.keys.RecvLane(i)
					s.SetLaneOwner(x.peer, lanes, i, i, x.remote, &recv)
				}
			}
		}
	}
}

// aLane is A's lane i (its previous keys if prev and it has them): the
// hostile peer seals and frames with its sealer and framer.
func (h *ingressFuzz) aLane(i int, prev bool) *lane {
	ln := h.a.shards[i].peers[2].local[i]
	if prev && ln.prev != nil {
		return ln.prev
	}
	return ln
}

func (h *ingressFuzz) bLane(i int) *lane { return h.b.shards[i].peers[1].local[i] }

// fill writes n pseudo-random bytes (seeded by the input) to h.pt; with ip
// they start with an IPv4 header from A's side to B's, so the packet passes
// B's source check and is delivered.
func (h *ingressFuzz) fill(n int, seed byte, ip bool) []byte {
	h.rng = h.rng*6364136223846793005 + uint64(seed) + 1442695040888963407
	x := h.rng
	p := h.pt[:n]
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	if ip && n >= 20 {
		copy(p, ipPacket("10.1.0.5", "10.2.0.9", 20, 0))
		binary.BigEndian.PutUint16(p[2:], uint16(n))
	}
	return p
}

// hostile frames sym (already at h.scratch[HeaderLen:]) under ln's framer
// and feeds it to B: to the shard owning lane i, or with wrong to the other
// shard, which hands it over.
func (h *ingressFuzz) hostile(ln *lane, i int, wrong bool, hd crypto.Header, symLen int) {
	d := ln.txf.Frame(h.scratch[:], hd, symLen)
	h.remember(i, d)
	h.feedB(i, wrong, d)
}

func (h *ingressFuzz) remember(i int, d []byte) {
	if len(h.history) == ingressHistory {
		copy(h.history, h.history[1:])
		h.history = h.history[:ingressHistory-1]
	}
	h.history = append(h.history, hostDgram{i, bytes.Clone(d)})
}

// feedB is readConn for one datagram from lane i's address: ingress works
// on the shard's own receive buffer, in place.
func (h *ingressFuzz) feedB(i int, wrong bool, d []byte) {
	s := h.b.shards[i]
	if wrong {
		s = h.b.shards[1-i]
	}
	n := copy(h.rx[:], d)
	s.ingress(0, h.rx[:n], laneAddr(i))
	settle(h.b)
}

// seal seals pt with ln's sealer at h.scratch[HeaderLen:], recording it
// as deliverable when it is sealed as data.
func (h *ingressFuzz) seal(ln *lane, ad, pt []byte) int {
	sym, err := ln.sealer.SealSymbol(h.scratch[crypto.HeaderLen:], ad, pt)
	if err != nil {
		h.t.Fatalf("seal %d bytes: %v", len(pt), err)
	}
	if ad == nil {
		h.sealedAB[string(pt)]++
	}
	return len(sym)
}

// step decodes and runs one operation.
func (h *ingressFuzz) step() {
	r := h.in
	switch op := r.u8(); op % 11 {
	case 0, 1, 2:
		// One hostile datagram, any header: flags (kind 0-3, seal,
		// ip payload, previous keys, wrong shard, lane, big group
		// jump), group delta, index, K, R, length, payload seed,
		// flags2 (swap the AD between data and control).
		fl, gd := r.u8(), r.u8()
		idx, k, rr := r.u8(), r.u8(), r.u8()
		n := r.u16() % 2100
		seed, fl2 := r.u8(), r.u8()
		i := int(fl>>6) & 1
		delta := uint32(int8(gd))
		if fl&0x80 != 0 {
			delta = uint32(gd) << 24
		}
		h.cursor[i] += delta
		kind := crypto.Kind(fl & 3)
		ln := h.aLane(i, fl&0x10 != 0)
		symLen := n
		if fl&4 != 0 {
			var ad []byte
			if (kind == crypto.KindControl) != (fl2&1 != 0) {
				ad = controlAD[:]
			}
			symLen = h.seal(ln, ad, h.fill(n, seed, fl&8 != 0))
		} else {
			copy(h.scratch[crypto.HeaderLen:], h.fill(n, seed, fl&8 != 0))
		}
		h.hostile(ln, i, fl&0x20 != 0, crypto.Header{Kind: kind, Group: h.cursor[i], Index: idx, K: k, R: rr}, symLen)
	case 3:
		// A hostile control frame: flags (sealed, body type, lane,
		// previous keys, wrong shard), then the body.
		fl := r.u8()
		i := int(fl>>3) & 1
		ln := h.aLane(i, fl&0x10 != 0)
		var body []byte
		switch fl >> 1 & 3 {
		case 0:
			body = []byte{ctlKeepalive}
		case 1: // a loss report that parses
			e := uint32(r.u16()) << (r.u8() % 17)
			rc, u := uint32(r.u16()), uint32(r.u16())
			rc = min(rc, e)
			u = min(u, e-rc)
			body = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{ctlLossReport}, e), rc), u)
		case 2: // a loss report of any length and content
			body = append([]byte{ctlLossReport}, h.fill(int(r.u8()%24), r.u8(), false)...)
		case 3: // any body, or none
			body = append([]byte(nil), h.fill(int(r.u8()), r.u8(), false)...)
			if len(body) > 0 {
				body[0] = r.u8() % 4
			}
		}
		symLen := len(body)
		if fl&1 != 0 {
			symLen = h.seal(ln, controlAD[:], body)
		} else {
			copy(h.scratch[crypto.HeaderLen:], body)
		}
		h.hostile(ln, i, fl&0x20 != 0, crypto.Header{Kind: crypto.KindControl}, symLen)
	case 4:
		// A hostile but well-formed FEC group, coded by a fresh encoder
		// at a chosen group id, with losses: recovery yields sealed
		// packets. Flags (lane, wrong shard, previous keys, ip
		// payload, reverse order), K, R, data count, group delta,
		// size, payload seed, loss mask.
		fl := r.u8()
		k, rr := 1+int(r.u8()%16), 1+int(r.u8()%8)
		nData := 1 + int(r.u8())%k
		gd, size, seed, mask := r.u8(), r.u16()%1500, r.u8(), r.u16()
		i := int(fl) & 1
		h.cursor[i] += uint32(int8(gd))
		ln := h.aLane(i, fl&4 != 0)
		enc, err := fec.NewEncoder(fec.EncoderConfig{K: k, R: rr, FirstGroup: h.cursor[i]})
		if err != nil {
			h.t.Fatal(err)
		}
		var out [][]byte
		drain := func() {
			for {
				m, par, ok := enc.NextParity()
				if !ok {
					return
				}
				copy(h.scratch[crypto.HeaderLen:], par)
				out = append(out, bytes.Clone(ln.txf.Frame(h.scratch[:], crypto.Header{Kind: crypto.KindParity, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, len(par))))
			}
		}
		for j := range nData {
			symLen := h.seal(ln, nil, h.fill(1+size+j, seed+byte(j), fl&8 != 0))
			m, err := enc.Add(h.scratch[crypto.HeaderLen:crypto.HeaderLen+symLen], h.now)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, bytes.Clone(ln.txf.Frame(h.scratch[:], crypto.Header{Kind: crypto.KindData, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, symLen)))
			drain()
		}
		enc.Flush()
		drain()
		for j := range out {
			if fl&16 != 0 {
				j = len(out) - 1 - j
			}
			if mask>>(j%16)&1 != 0 {
				continue
			}
			h.remember(i, out[j])
			h.feedB(i, fl&2 != 0, out[j])
		}
	case 5:
		// Genuine traffic A → B on a lane: count, size, loss mask.
		fl, cnt, size, mask := r.u8(), 1+int(r.u8()%24), 20+r.u16()%1380, r.u16()
		i := int(fl) & 1
		h.genuine(h.a, h.b, i, cnt, size, func(k int) bool { return mask>>(k%16)&1 != 0 })
	case 6:
		// Genuine traffic B → A on a lane (B's encoder runs the ratio
		// A's — that is, the fuzzer's — loss reports chose).
		fl, cnt, size := r.u8(), 1+int(r.u8()%24), 20+r.u16()%1380
		h.genuine(h.b, h.a, int(fl)&1, cnt, size, nil)
	case 7:
		// Time passes (up to 16 s), with or without the timers running.
		x, fl := time.Duration(r.u8()), r.u8()
		h.advance(x*x*250*time.Microsecond, fl&1 == 0)
	case 8:
		// Loss reports and keepalives both ways.
		for _, sd := range []*side{h.a, h.b} {
			for _, s := range sd.shards {
				for _, ln := range s.owned {
					ln.cfg.Keepalive, ln.kaWait, ln.reportDue = time.Second, 0, time.Time{}
				}
				s.tick()
				s.flushAll()
			}
		}
		h.deliver(h.a, h.b, nil)
		h.deliver(h.b, h.a, nil)
	case 9:
		// Replay an earlier A → B datagram, as it was or reframed with
		// another header under the same keys (its symbol, sealed or
		// not, reused).
		if len(h.history) == 0 {
			return
		}
		hd := h.history[int(r.u8())%len(h.history)]
		fl, gd, idx := r.u8(), r.u8(), r.u8()
		d := h.scratch[:len(hd.data)]
		copy(d, hd.data)
		if fl&1 != 0 {
			ln := h.aLane(hd.lane, fl&4 != 0)
			old, sym, err := ln.txf.Deframe(d)
			if err == nil {
				copy(h.scratch[crypto.HeaderLen:], sym)
				old.Group += uint32(int8(gd))
				old.Index = idx
				old.Kind = crypto.Kind(fl>>4) & 3
				d = ln.txf.Frame(h.scratch[:], old, len(sym))
			}
		}
		h.feedB(hd.lane, fl&2 != 0, d)
	case 10:
		// Rekey (a few times at most), B holding its old keys for
		// sending until A uses the new ones or not.
		if h.epoch >= ingressMaxRekeys {
			return
		}
		h.epoch++
		h.connect(op&0x80 != 0)
	}
}

// genuine sends cnt packets of size bytes from one side's lane i to the
// other, losing those drop picks.
func (h *ingressFuzz) genuine(from, to *side, i, cnt, size int, drop func(int) bool) [][]byte {
	src, dst, sealed := "10.1.0.5", "10.2.0.9", h.sealedAB
	if from == h.b {
		src, dst, sealed = "10.2.0.9", "10.1.0.5", h.sealedBA
	}
	var pkts [][]byte
	for range cnt {
		h.seq++
		p := ipPacket(src, dst, size, int(h.seq))
		sealed[string(p)]++
		pkts = append(pkts, p)
		inject(h.t, from.shards[i], p)
	}
	h.deliver(from, to, drop)
	return pkts
}

// deliver is deliverAll, keeping what A sends for replays.
func (h *ingressFuzz) deliver(from, to *side, drop func(int) bool) {
	for _, s := range from.shards {
		s.flushAll()
	}
	if from == h.a {
		for i, ds := range from.sent {
			for _, d := range ds {
				h.remember(i, d.data)
			}
		}
	}
	deliverAll(h.t, from, to, drop)
	settle(to)
	settle(from)
}

// advance moves both sides' clocks and, with tick, runs their timers and
// sends what the timers produced (flushed parity).
func (h *ingressFuzz) advance(d time.Duration, tick bool) {
	h.now = h.now.Add(d)
	for _, sd := range []*side{h.a, h.b} {
		for _, s := range sd.shards {
			s.now = h.now
			if tick {
				s.tick()
			}
		}
	}
	if tick {
		h.deliver(h.a, h.b, nil)
		h.deliver(h.b, h.a, nil)
	}
}

// settle runs the mesh until every hand-over is processed and every lent
// buffer is home.
func settle(sd *side) {
	for range 3 {
		for _, s := range sd.shards {
			s.takeMesh()
			s.flushAll()
		}
	}
}

// check asserts the invariants that hold between operations.
func (h *ingressFuzz) check(when string) {
	t := h.t
	for _, x := range []struct {
		name   string
		sd     *side
		seen   *[2]int
		sealed map[string]int
	}{{"A", h.a, &h.seenA, h.sealedBA}, {"B", h.b, &h.seenB, h.sealedAB}} {
		for i, s := range x.sd.shards {
			if held := s.waitTotal; s.pool.Free() != s.pool.Cap()-held {
				t.Fatalf("%s: %s shard %d: %d of %d pool buffers free, %d legitimately held: leak", when, x.name, i, s.pool.Free(), s.pool.Cap(), held)
			}
			for c, n := range s.txN {
				if n != 0 {
					t.Fatalf("%s: %s shard %d: %d datagrams left staged on conn %d", when, x.name, i, n, c)
				}
			}
			for o, hs := range s.handoff {
				if len(hs) != 0 || len(s.retOut[o]) != 0 {
					t.Fatalf("%s: %s shard %d: packets left for shard %d", when, x.name, i, o)
				}
			}
			for _, ln := range s.lanes {
				for _, l := range []*lane{ln, ln.prev} {
					if l != nil && l.dec.StoredBytes() > l.dec.CapBytes() {
						t.Fatalf("%s: %s shard %d: decoder holds %d bytes, cap %d", when, x.name, i, l.dec.StoredBytes(), l.dec.CapBytes())
					}
				}
			}
			for _, p := range x.sd.tun[i][x.seen[i]:] {
				if x.sealed[string(p)] == 0 {
					t.Fatalf("%s: %s shard %d delivered a %d-byte packet the peer never sealed, or once more than it did", when, x.name, i, len(p))
				}
				x.sealed[string(p)]--
			}
			x.seen[i] = len(x.sd.tun[i])
		}
	}
}

// finish lets every timer run out, then checks that genuine traffic still
// flows both ways on both lanes and that every buffer came home.
func (h *ingressFuzz) finish() {
	t := h.t
	h.advance(prevKeep+waitMaxAge, true)
	h.advance(time.Second, true)
	h.check("after expiry")
	for i := range 2 {
		// A sender goes on after the newest group B accepted: a hostile
		// peer may have moved B's window anywhere (it holds the keys,
		// so that is its own lane it breaks), and a genuine sender
		// never goes back.
		if head, ok := h.bLane(i).dec.Head(); ok {
			k, r := h.aLane(i, false).enc.Ratio()
			enc, err := fec.NewEncoder(fec.EncoderConfig{K: k, R: r, FirstGroup: head + 1})
			if err != nil {
				t.Fatal(err)
			}
			h.aLane(i, false).enc = enc
		}
		sent := h.genuine(h.a, h.b, i, 6, 200, nil)
		h.wantDelivered("A → B", h.b.tun[i], sent, i)
		sent = h.genuine(h.b, h.a, i, 6, 200, nil)
		h.wantDelivered("B → A", h.a.tun[i], sent, i)
	}
	h.advance(prevKeep+waitMaxAge, true)
	h.check("at the end")
}

func (h *ingressFuzz) wantDelivered(dir string, tun [][]byte, sent [][]byte, lane int) {
	got := map[string]bool{}
	for _, p := range tun {
		got[string(p)] = true
	}
	for j, p := range sent {
		if !got[string(p)] {
			h.t.Fatalf("%s lane %d: genuine packet %d of %d after the hostile sequence was not delivered: the lane is wedged", dir, lane, j+1, len(sent))
		}
	}
}
