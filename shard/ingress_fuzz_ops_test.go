package shard

// The operations FuzzShardIngress decodes from its input (ingressFuzz.step):
// hostile datagrams, control frames and FEC groups made with A's real lane
// keys, genuine traffic, replays, rekeys and time, and how they reach B.

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

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

// hostile frames sym (already at h.scratch[HeaderLen:]) under ks's framer
// and feeds it to B: to the shard owning lane i, or with wrong to the other
// shard, which hands it over.
func (h *ingressFuzz) hostile(ks *keyset, i int, wrong bool, hd crypto.Header, symLen int) {
	d := ks.txf.Frame(h.scratch[:], hd, symLen)
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

// seal seals pt with ks's sealer at h.scratch[HeaderLen:], recording it
// as deliverable when it is sealed as data.
func (h *ingressFuzz) seal(ks *keyset, ad, pt []byte) int {
	sym, err := ks.sealer.SealSymbol(h.scratch[crypto.HeaderLen:], ad, pt)
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
		ks := h.aKeys(i, fl&0x10 != 0)
		symLen := n
		if fl&4 != 0 {
			var ad []byte
			if (kind == crypto.KindControl) != (fl2&1 != 0) {
				ad = controlAD[:]
			}
			symLen = h.seal(ks, ad, h.fill(n, seed, fl&8 != 0))
		} else {
			copy(h.scratch[crypto.HeaderLen:], h.fill(n, seed, fl&8 != 0))
		}
		h.hostile(ks, i, fl&0x20 != 0, crypto.Header{Kind: kind, Group: h.cursor[i], Index: idx, K: k, R: rr}, symLen)
	case 3:
		// A hostile control frame: flags (sealed, body type, lane,
		// previous keys, wrong shard), then the body.
		fl := r.u8()
		i := int(fl>>3) & 1
		ks := h.aKeys(i, fl&0x10 != 0)
		var body []byte
		switch fl >> 1 & 3 {
		case 0: // a keepalive: any features, round trip and padding
			body = append([]byte{ctlKeepalive}, h.fill(int(r.u8()%8), r.u8(), false)...)
		case 1: // a loss report that parses
			e := uint32(r.u16()) << (r.u8() % 17)
			rc, u := uint32(r.u16()), uint32(r.u16())
			rc = min(rc, e)
			u = min(u, e-rc)
			body = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{ctlLossReport}, e), rc), u)
			if x := r.u8(); x&1 != 0 { // with runs, a delay echo, a split, and padding
				body = binary.BigEndian.AppendUint32(body, min(uint32(r.u16()), e-rc))
				if x&2 != 0 { // any stamp, echo and held (delay.go)
					body = append(body, echoMark)
					for range 3 {
						body = binary.BigEndian.AppendUint32(body, uint32(r.u16())<<16|uint32(r.u16()))
					}
					if x&4 != 0 { // any count and split (split.go)
						body = append(body, splitMark)
						for range 5 {
							body = binary.BigEndian.AppendUint32(body, uint32(r.u16())<<16|uint32(r.u16()))
						}
					}
				}
				body = append(body, h.fill(int(r.u8()%32), r.u8(), false)...)
			}
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
			symLen = h.seal(ks, controlAD[:], body)
		} else {
			copy(h.scratch[crypto.HeaderLen:], body)
		}
		h.hostile(ks, i, fl&0x20 != 0, crypto.Header{Kind: crypto.KindControl}, symLen)
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
		ks := h.aKeys(i, fl&4 != 0)
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
				out = append(out, bytes.Clone(ks.txf.Frame(h.scratch[:], crypto.Header{Kind: crypto.KindParity, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, len(par))))
			}
		}
		for j := range nData {
			symLen := h.seal(ks, nil, h.fill(1+size+j, seed+byte(j), fl&8 != 0))
			m, err := enc.Add(h.scratch[crypto.HeaderLen:crypto.HeaderLen+symLen], h.now)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, bytes.Clone(ks.txf.Frame(h.scratch[:], crypto.Header{Kind: crypto.KindData, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, symLen)))
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
		// Genuine traffic A → B on a lane: count, size, loss mask; with
		// flag 0x80 also a change mask, a position and an XOR: an
		// on-path attacker without the keys changes those datagrams.
		// One changed past the bytes the tag covers passes the tag and
		// must fail its AEAD open (only sealed plaintexts reach TUN).
		fl, cnt, size, mask := r.u8(), 1+int(r.u8()%24), 20+r.u16()%1380, r.u16()
		i := int(fl) & 1
		drop := func(k int) bool { return mask>>(k%16)&1 != 0 }
		if fl&0x80 == 0 {
			h.genuine(h.a, h.b, i, cnt, size, drop)
			break
		}
		cm, pos, x := r.u16(), r.u16(), r.u8()|1
		h.genuineVia(h.a, h.b, i, cnt, size, func(k int, d []byte) bool {
			if cm>>(k%16)&1 != 0 {
				d[(pos+k)%len(d)] ^= x
			}
			return !drop(k)
		})
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
				for _, ln := range s.table.owned {
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
			ks := h.aKeys(hd.lane, fl&4 != 0)
			old, sym, err := ks.txf.Deframe(d)
			if err == nil {
				copy(h.scratch[crypto.HeaderLen:], sym)
				old.Group += uint32(int8(gd))
				old.Index = idx
				old.Kind = crypto.Kind(fl>>4) & 3
				d = ks.txf.Frame(h.scratch[:], old, len(sym))
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
	return h.genuineVia(from, to, i, cnt, size, passUnless(drop))
}

// passUnless is a deliverEach wire that loses what drop picks (nil: none).
func passUnless(drop func(int) bool) func(int, []byte) bool {
	return func(k int, _ []byte) bool { return drop == nil || !drop(k) }
}

// genuineVia is genuine over a wire that may change datagrams (deliverEach).
func (h *ingressFuzz) genuineVia(from, to *side, i, cnt, size int, pass func(int, []byte) bool) [][]byte {
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
	h.deliverVia(from, to, pass)
	return pkts
}

// deliver is deliverAll, keeping what A sends for replays.
func (h *ingressFuzz) deliver(from, to *side, drop func(int) bool) {
	h.deliverVia(from, to, passUnless(drop))
}

// deliverVia is deliverEach, keeping what A sends (unchanged) for replays.
func (h *ingressFuzz) deliverVia(from, to *side, pass func(int, []byte) bool) {
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
	deliverEach(h.t, from, to, pass)
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
