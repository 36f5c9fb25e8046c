package crypto

// Tests of the handshake between two Locals in memory (parties): complete
// handshakes, their keys, replays, rejections, lengths, cookies, and lane
// offers across versions.

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type parties struct {
	a, b   *Local // a initiates, b responds
	pa, pb *Peer  // b as seen by a, a as seen by b
}

func newParties(t testing.TB, psk PresharedKey, cacheSS bool) parties {
	t.Helper()
	ka, _ := GeneratePrivateKey()
	kb, _ := GeneratePrivateKey()
	a, b := NewLocal(ka, cacheSS), NewLocal(kb, cacheSS)
	pa, err := a.AddPeer(b.PublicKey(), psk)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.AddPeer(a.PublicKey(), psk)
	if err != nil {
		t.Fatal(err)
	}
	return parties{a, b, pa, pb}
}

func offer(n int, base uint16) LaneOffer {
	o := LaneOffer{}
	for i := range n {
		o.Ports = append(o.Ports, base+uint16(i))
	}
	return o
}

// handshake runs a full handshake in memory and returns both sessions.
func handshake(t testing.TB, p parties, now time.Time) (*Session, *Session) {
	t.Helper()
	init, d1, err := p.a.Initiate(p.pa, 11, offer(4, 5000), now)
	if err != nil {
		t.Fatal(err)
	}
	if typ, _, _ := p.b.Classify(d1); typ != TypeInitiation {
		t.Fatalf("classify initiation: %v", typ)
	}
	inc, err := p.b.ConsumeInitiation(d1)
	if err != nil {
		t.Fatal(err)
	}
	d2, sb, err := inc.Respond(22, offer(2, 6000))
	if err != nil {
		t.Fatal(err)
	}
	if typ, idx, _ := p.a.Classify(d2); typ != TypeResponse || idx != 11 {
		t.Fatalf("classify response: %v %d", typ, idx)
	}
	sa, err := init.ConsumeResponse(d2)
	if err != nil {
		t.Fatal(err)
	}
	return sa, sb
}

func TestFullHandshake(t *testing.T) {
	for _, psk := range []PresharedKey{{}, {1, 2, 3}} {
		p := newParties(t, psk, true)
		sa, sb := handshake(t, p, t0)
		if sa.Peer != p.pa || sb.Peer != p.pb || !sa.Initiator || sb.Initiator {
			t.Fatal("session peers/roles wrong")
		}
		if sa.RemoteIndex != 22 || sb.RemoteIndex != 11 || sa.LocalIndex != 11 {
			t.Fatalf("indices: %+v %+v", sa, sb)
		}
		if sa.Lanes(offer(4, 5000)) != 2 || sb.Lanes(offer(2, 6000)) != 2 || sb.Remote.Ports[3] != 5003 {
			t.Fatalf("lane agreement: %v %v", sa.Remote, sb.Remote)
		}
		// Each side's send keys are the other's receive keys, per lane.
		for lane := range 2 {
			if sa.Keys.SendLane(lane) != sb.Keys.RecvLane(lane) || sb.Keys.SendLane(lane) != sa.Keys.RecvLane(lane) {
				t.Fatalf("lane %d keys do not pair up", lane)
			}
		}
		// And data flows over the keys.
		k := sa.Keys.SendLane(1)
		kr := sb.Keys.RecvLane(1)
		s, fs, o, fr := NewSealer(&k.AEAD), NewFramer(&k), NewOpener(&kr.AEAD), NewFramer(&kr)
		d := sealFrame(t, s, &fs, make([]byte, 200), []byte("ping"), Header{})
		_, sym, err := fr.Deframe(d)
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := o.OpenSymbol(nil, sym); err != nil || string(pt) != "ping" {
			t.Fatalf("data over handshake keys: %v", err)
		}
	}
}

// Every lane and direction of a session has its own AEAD, tag and HP keys.
func TestLaneKeysDistinct(t *testing.T) {
	sa, _ := handshake(t, newParties(t, PresharedKey{}, true), t0)
	seen := map[[32]byte]string{}
	seen16 := map[[16]byte]string{}
	for lane := range MaxLanes {
		for dir, k := range map[string]LaneKeys{"send": sa.Keys.SendLane(lane), "recv": sa.Keys.RecvLane(lane)} {
			name := dir + string(rune('0'+lane))
			for _, kk := range [][32]byte{k.AEAD} {
				if prev, dup := seen[kk]; dup {
					t.Fatalf("%s AEAD key equals %s", name, prev)
				}
				seen[kk] = name
			}
			for _, kk := range [][16]byte{k.Tag, k.HP} {
				if prev, dup := seen16[kk]; dup {
					t.Fatalf("%s key equals %s", name, prev)
				}
				seen16[kk] = name
			}
		}
	}
}

func TestInitiationReplayRefused(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	_, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	if _, err := p.b.ConsumeInitiation(d1); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.ConsumeInitiation(d1); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("replayed initiation: %v", err)
	}
	_, older, _ := p.a.Initiate(p.pa, 2, offer(1, 1), t0.Add(-time.Second))
	if _, err := p.b.ConsumeInitiation(older); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("older initiation: %v", err)
	}
	_, newer, _ := p.a.Initiate(p.pa, 3, offer(1, 1), t0.Add(time.Nanosecond))
	if _, err := p.b.ConsumeInitiation(newer); err != nil {
		t.Fatalf("newer initiation refused: %v", err)
	}
	// Reconfiguring the peer keeps its replay protection.
	if _, err := p.b.AddPeer(p.a.PublicKey(), PresharedKey{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.b.ConsumeInitiation(newer); !errors.Is(err, ErrStaleTimestamp) {
		t.Fatalf("replay after reload: %v", err)
	}
}

func TestHandshakeRejections(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	stranger := newParties(t, PresharedKey{}, true)

	// Not addressed to b: rejected by mac1, before any DH.
	_, toOther, _ := stranger.a.Initiate(stranger.pa, 1, offer(1, 1), t0)
	before := p.b.scalarMults()
	if _, err := p.b.ConsumeInitiation(toOther); !errors.Is(err, ErrMac1) {
		t.Fatalf("initiation for another key: %v", err)
	}
	if typ, _, _ := p.b.Classify(toOther); typ != NotHandshake {
		t.Fatal("classified a foreign initiation")
	}
	if p.b.scalarMults() != before {
		t.Fatal("a DH was done for a datagram failing mac1")
	}

	// Addressed to b, but from an unconfigured key.
	ks, _ := GeneratePrivateKey()
	s := NewLocal(ks, true)
	ps, _ := s.AddPeer(p.b.PublicKey(), PresharedKey{})
	_, fromStranger, _ := s.Initiate(ps, 1, offer(1, 1), t0)
	if _, err := p.b.ConsumeInitiation(fromStranger); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown initiator: %v", err)
	}

	// Any flipped byte is rejected.
	_, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	for _, pos := range []int{0, 23, 24, 40, len(d1) - 33, len(d1) - 17} {
		bad := bytes.Clone(d1)
		bad[pos] ^= 4
		if _, err := p.b.ConsumeInitiation(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", pos)
		}
	}

	// PSK mismatch: the initiation is keyed by the initiator's PSK, which
	// is none of the responder's keys: refused by mac1, before any DH (it
	// used to be answered, the initiator failing to finish).
	q := newParties(t, PresharedKey{1}, true)
	if _, err := q.b.AddPeer(q.a.PublicKey(), PresharedKey{2}); err != nil {
		t.Fatal(err)
	}
	_, d1, _ = q.a.Initiate(q.pa, 5, offer(1, 1), t0)
	if typ, _, _ := q.b.Classify(d1); typ != NotHandshake {
		t.Fatal("classified an initiation keyed by another PSK")
	}
	if _, err := q.b.ConsumeInitiation(d1); !errors.Is(err, ErrMac1) {
		t.Fatalf("initiation keyed by another PSK: %v", err)
	}

	// A response to another initiation index is not ours.
	in1, d1, _ := p.a.Initiate(p.pa, 100, offer(1, 1), t0.Add(time.Hour))
	in2, _, _ := p.a.Initiate(p.pa, 200, offer(1, 1), t0.Add(time.Hour))
	inc, _ := p.b.ConsumeInitiation(d1)
	d2, _, _ := inc.Respond(7, offer(1, 1))
	if _, err := in2.ConsumeResponse(d2); !errors.Is(err, ErrNotForThisInitiation) {
		t.Fatalf("response for index 100 given to 200: %v", err)
	}
	if _, err := in1.ConsumeResponse(d2); err != nil {
		t.Fatal(err)
	}
	// Lane offers out of range are refused on both sides.
	if _, _, err := p.a.Initiate(p.pa, 1, LaneOffer{}, t0); err == nil {
		t.Fatal("empty lane offer accepted")
	}
	if _, _, err := p.a.Initiate(p.pa, 1, offer(MaxLanes+1, 1), t0); err == nil {
		t.Fatal("oversized lane offer accepted")
	}
	if _, err := p.a.AddPeer(p.a.PublicKey(), PresharedKey{}); err == nil {
		t.Fatal("own key accepted as a peer")
	}
	if _, err := p.a.AddPeer(PublicKey{}, PresharedKey{}); err == nil {
		t.Fatal("low-order (zero) peer key accepted")
	}
}

func TestHandshakeLengthsVaryAndTopBit(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	lens := map[int]bool{}
	top := 0
	const n = 200
	for i := range n {
		_, d, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0.Add(time.Duration(i)))
		lens[len(d)] = true
		// Unmask as the receiver would, but look before the top bit is cleared.
		in := bytes.Clone(d[hsSeedLen : len(d)-hsTrailer])
		xorMask(&p.b.wk, d[:hsSeedLen], in)
		top += int(in[hsInnerHdr+31] >> 7)
		if _, err := p.b.ConsumeInitiation(d); err != nil {
			t.Fatal(err)
		}
	}
	if len(lens) < 30 {
		t.Fatalf("only %d distinct initiation lengths in %d", len(lens), n)
	}
	if top < n/4 || top > 3*n/4 {
		t.Fatalf("ephemeral top bit set in %d of %d initiations", top, n)
	}
}

func TestCookieFlow(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	cc := NewCookieChecker()
	src := netip.MustParseAddrPort("192.0.2.1:51820")
	in, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	if cc.CheckMac2(d1, src, t0) {
		t.Fatal("initiation without a cookie passed mac2")
	}
	before := p.b.scalarMults()
	reply, err := p.b.CookieReply(d1, cc, src, t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.b.scalarMults() != before {
		t.Fatal("cookie reply did a DH")
	}
	if len(reply) > len(d1) {
		t.Fatalf("cookie reply (%d) longer than initiation (%d): amplification", len(reply), len(d1))
	}
	if typ, _, _ := p.a.Classify(reply); typ != NotHandshake {
		t.Fatal("cookie reply classified as a handshake")
	}
	// Only the initiation it answers can take it.
	other, _, _ := p.a.Initiate(p.pa, 2, offer(1, 1), t0)
	if err := other.ConsumeCookieReply(reply, t0); err == nil {
		t.Fatal("cookie reply accepted by another initiation")
	}
	if err := in.ConsumeCookieReply(reply, t0); err != nil {
		t.Fatal(err)
	}
	_, d1b, _ := p.a.Initiate(p.pa, 3, offer(1, 1), t0.Add(time.Second))
	if !cc.CheckMac2(d1b, src, t0.Add(time.Second)) {
		t.Fatal("initiation with the cookie failed mac2")
	}
	if cc.CheckMac2(d1b, netip.MustParseAddrPort("192.0.2.2:51820"), t0.Add(time.Second)) {
		t.Fatal("cookie valid for another source address")
	}
	if cc.CheckMac2(d1b, netip.MustParseAddrPort("192.0.2.1:51821"), t0.Add(time.Second)) {
		t.Fatal("cookie valid for another source port")
	}
	// Valid into the next slot, not beyond.
	if !cc.CheckMac2(d1b, src, t0.Add(CookieSlot)) {
		t.Fatal("cookie expired after one slot")
	}
	if cc.CheckMac2(d1b, src, t0.Add(3*CookieSlot)) {
		t.Fatal("cookie still valid three slots later")
	}
	// The initiator stops using an old cookie.
	_, d1c, _ := p.a.Initiate(p.pa, 4, offer(1, 1), t0.Add(CookieValidity+time.Second))
	if cc.CheckMac2(d1c, src, t0.Add(CookieValidity+time.Second)) {
		t.Fatal("initiator used an expired cookie")
	}
}

// The lane an initiation was sent from reaches the responder, and a
// version-1 offer (no sending lane) still parses, as lane 0.
func TestLaneOfferFrom(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	_, d, err := p.a.Initiate(p.pa, 1, LaneOffer{Ports: []uint16{100, 101, 102}, From: 2}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in, err := p.b.ConsumeInitiation(d)
	if err != nil {
		t.Fatal(err)
	}
	_, sess, err := in.Respond(2, offer(2, 9))
	if err != nil || sess.Remote.From != 2 || sess.Remote.Ports[2] != 102 {
		t.Fatalf("responder sees %+v, %v", sess.Remote, err)
	}
	if _, _, err := p.a.Initiate(p.pa, 1, LaneOffer{Ports: []uint16{100}, From: 1}, t0.Add(time.Second)); err == nil {
		t.Fatal("an offer sent from a lane it does not have was accepted")
	}
	v1, err := parseLaneOffer([]byte{1, 2, 0, 5, 0, 6})
	if err != nil || v1.From != 0 || !slices.Equal(v1.Ports, []uint16{5, 6}) {
		t.Fatalf("version 1: %+v, %v", v1, err)
	}
}

// A responder answers in its initiator's offer version, so an initiator
// that only reads version 1 still completes the handshake.
func TestAnswerInInitiatorsVersion(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	in, d, err := p.a.Initiate(p.pa, 1, LaneOffer{Ports: []uint16{100, 101}, version: 1}, t0)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := p.b.ConsumeInitiation(d)
	if err != nil || inc.offer.version != 1 {
		t.Fatalf("offer read as version %d, %v", inc.offer.version, err)
	}
	d2, _, err := inc.Respond(2, offer(2, 9))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := in.ConsumeResponse(d2)
	if err != nil || sess.Remote.version != 1 {
		t.Fatalf("answer in version %d, %v; want 1", sess.Remote.version, err)
	}
}
