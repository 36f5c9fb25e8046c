package shard

// The ingress fuzz target, FuzzShardIngress: its harness (two sides with a
// two-lane session keyed by the epoch), the invariants checked between
// operations, and the end check that the lanes are not wedged.

import (
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
//   - every shard's lane table passes its check (laneTable.check), no lane
//     has two owners and no address is bound to two peers;
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
		// The fewest groups a sender interleaving fec.MaxDepth deep (an
		// auto lane's start-up guess) fits in.
		h.win = fec.DecoderConfig{MaxGroups: fec.MaxDepth, MaxBytes: 1, MaxAhead: fec.MaxDepth - 1, GroupTTL: 20 * time.Millisecond}
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
			// The session starts at the fuzzed ratio, not at the
			// adapter's start-up guess InstallLane gives it.
			enc := x.sd.shards[i].table.peers[x.peer].local[i].cur.enc
			if err := enc.SetRatio(h.fc.K, h.fc.R); err != nil {
				t.Fatal(err)
			}
			enc.SetDepth(1)
			for j, s := range x.sd.shards {
				if j != i {
					recv := x.keys.RecvLane(i)
					s.SetLaneOwner(x.peer, lanes, i, i, x.remote, &recv)
				}
			}
		}
	}
}

// aKeys is the keys of A's lane i (its previous keys if prev and it has
// them): the hostile peer seals and frames with their sealer and framer.
func (h *ingressFuzz) aKeys(i int, prev bool) *keyset {
	ln := h.a.shards[i].table.peers[2].local[i]
	if prev && ln.prev != nil {
		return ln.prev
	}
	return ln.cur
}

func (h *ingressFuzz) bLane(i int) *lane { return h.b.shards[i].table.peers[1].local[i] }

// check asserts the invariants that hold between operations.
func (h *ingressFuzz) check(when string) {
	t := h.t
	for _, x := range []struct {
		name   string
		sd     *side
		seen   *[2]int
		sealed map[string]int
	}{{"A", h.a, &h.seenA, h.sealedBA}, {"B", h.b, &h.seenB, h.sealedAB}} {
		checkTables(t, when+": "+x.name, x.sd, true)
		checkAddrOwners(t, when+": "+x.name, x.sd)
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
			for _, ln := range s.table.lanes {
				for _, ks := range ln.keysets() {
					if ks != nil && ks.dec.StoredBytes() > ks.dec.CapBytes() {
						t.Fatalf("%s: %s shard %d: decoder holds %d bytes, cap %d", when, x.name, i, ks.dec.StoredBytes(), ks.dec.CapBytes())
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
		if head, ok := h.bLane(i).cur.dec.Head(); ok {
			k, r := h.aKeys(i, false).enc.Ratio()
			enc, err := fec.NewEncoder(fec.EncoderConfig{K: k, R: r, FirstGroup: head + 1})
			if err != nil {
				t.Fatal(err)
			}
			h.aKeys(i, false).enc = enc
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
