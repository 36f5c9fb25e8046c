package crypto

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// sampleLens is a WireLengths that draws uniformly from a multiset of
// lengths, as a peer's recent data lengths are.
type sampleLens []int

func (s sampleLens) DrawLen(lo, hi int) (int, bool) {
	var ok []int
	for _, n := range s {
		if n >= lo && n <= hi {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return 0, false
	}
	return ok[randUint(len(ok))], true
}

// inBands reports whether n is a length of the built-in distribution.
func inBands(n int) bool {
	for _, b := range tunnelBands {
		if n >= b.lo && n <= b.hi {
			return true
		}
	}
	return false
}

// The built-in distribution restricted to a range gives only lengths of its
// bands in that range, in the bands' proportions.
func TestTunnelLengthsRestricted(t *testing.T) {
	const n = 20000
	for _, r := range []struct{ lo, hi int }{{56, 1024}, {177, 1024}, {56, 88}, {56, 2000}, {100, 100}} {
		ack, full := 0, 0
		for range n {
			l := drawLen(nil, r.lo, r.hi)
			if l < r.lo || l > r.hi || !inBands(l) {
				t.Fatalf("[%d,%d]: drew %d", r.lo, r.hi, l)
			}
			switch l {
			case 80, 92, 100, 112:
				ack++
			case 1450:
				full++
			}
		}
		var wantAck, wantFull float64
		switch r {
		case struct{ lo, hi int }{56, 1024}:
			wantAck = 42.0 / (42 + 12 + 8 + 3*24.0/449)
		case struct{ lo, hi int }{56, 88}, struct{ lo, hi int }{100, 100}:
			wantAck = 1
		case struct{ lo, hi int }{56, 2000}:
			wantAck, wantFull = 0.42, 0.35
		}
		if got := float64(ack) / n; got < wantAck-0.02 || got > wantAck+0.02 {
			t.Errorf("[%d,%d]: ACK-sized share %.3f, want %.3f", r.lo, r.hi, got, wantAck)
		}
		if got := float64(full) / n; got < wantFull-0.02 || got > wantFull+0.02 {
			t.Errorf("[%d,%d]: full-size share %.3f, want %.3f", r.lo, r.hi, got, wantFull)
		}
	}
	// A range outside the bands: uniform over it.
	for range 100 {
		if l := drawLen(nil, 1451, 1500); l < 1451 || l > 1500 {
			t.Fatalf("drew %d outside 1451..1500", l)
		}
	}
	if l := drawLen(sampleLens{500}, 600, 599); l != 600 {
		t.Fatalf("empty range: drew %d, want its minimum", l)
	}
}

// A supplied distribution is followed, restricted to the feasible lengths;
// when none of it is feasible, the built-in one is.
func TestDrawLenFollowsSupplied(t *testing.T) {
	d := sampleLens{92, 300, 300, 300, 600, 1460}
	counts := map[int]int{}
	const n = 8000
	for range n {
		counts[drawLen(d, 177, 1024)]++
	}
	if len(counts) != 2 || counts[300]+counts[600] != n {
		t.Fatalf("drew %d distinct lengths (%d of 300 or 600) from %v restricted to 177..1024", len(counts), counts[300]+counts[600], d)
	}
	if s := float64(counts[300]) / n; s < 0.72 || s > 0.78 {
		t.Fatalf("300 drawn %.3f of the time, want 0.75", s)
	}
	for range 200 {
		if l := drawLen(sampleLens{92, 1460}, 177, 1024); l < 177 || l > 1024 || !inBands(l) {
			t.Fatalf("nothing feasible supplied: drew %d, want a built-in length in 177..1024", l)
		}
	}
}

// Sealed initiations and responses take their lengths from the peer's
// distribution (never below their minimum nor above hsMaxLen, which every
// router accepts), and the receiver accepts each of them; a response is
// never longer than the initiation it answers.
func TestHandshakeLengthsFollowDistribution(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	lens := sampleLens{80, 92, 240, 400, 400, 400, 400, 700, 1200, 1460}
	p.pa.SetWireLengths(lens)
	p.pb.SetWireLengths(lens)
	initLens, respLens := map[int]int{}, map[int]int{}
	for i := range 120 {
		in, d1, err := p.a.Initiate(p.pa, 11, offer(4, 5000), t0.Add(time.Duration(i)))
		if err != nil {
			t.Fatal(err)
		}
		initLens[len(d1)]++
		if len(d1) > hsMaxLen || !slices.Contains(lens, len(d1)) {
			t.Fatalf("initiation of %d bytes, not one of %v up to %d", len(d1), lens, hsMaxLen)
		}
		inc, err := p.b.ConsumeInitiation(d1)
		if err != nil {
			t.Fatalf("%d-byte initiation refused: %v", len(d1), err)
		}
		d2, _, err := inc.Respond(22, offer(2, 6000))
		if err != nil {
			t.Fatal(err)
		}
		respLens[len(d2)]++
		if len(d2) > respMaxLen(len(d1)) || !slices.Contains(lens, len(d2)) {
			t.Fatalf("response of %d bytes to a %d-byte initiation (lengths %v)", len(d2), len(d1), lens)
		}
		if _, err := in.ConsumeResponse(d2); err != nil {
			t.Fatalf("%d-byte response refused: %v", len(d2), err)
		}
	}
	// The initiation's minimum is above 92 here (and 80): 240, 400 and 700
	// are what it can take, 400 four times as often.
	if len(initLens) != 3 || initLens[400] < initLens[240] || initLens[400] < initLens[700] {
		t.Fatalf("initiation lengths %v from %v", initLens, lens)
	}
	if len(respLens) < 2 {
		t.Fatalf("response lengths %v from %v", respLens, lens)
	}

	// No distribution: the built-in one.
	p.pa.SetWireLengths(nil)
	p.pb.SetWireLengths(nil)
	distinct := map[int]bool{}
	for i := range 60 {
		in, d1, _ := p.a.Initiate(p.pa, 11, offer(4, 5000), t0.Add(time.Duration(1000+i)))
		inc, err := p.b.ConsumeInitiation(d1)
		if err != nil || len(d1) > hsMaxLen || !inBands(len(d1)) {
			t.Fatalf("%d-byte initiation: %v", len(d1), err)
		}
		d2, _, _ := inc.Respond(22, offer(2, 6000))
		if len(d2) > respMaxLen(len(d1)) || !inBands(len(d2)) {
			t.Fatalf("response of %d bytes to a %d-byte initiation", len(d2), len(d1))
		}
		if _, err := in.ConsumeResponse(d2); err != nil {
			t.Fatalf("%d-byte response refused: %v", len(d2), err)
		}
		distinct[len(d1)] = true
	}
	if len(distinct) < 20 {
		t.Fatalf("only %d distinct built-in initiation lengths", len(distinct))
	}
}

// Cookie replies take their lengths from the supplied distribution, up to
// the initiation's length: up to hsMaxLen for an initiation that says its
// sender accepts that, and within the 56..88 older routers accept for one
// that does not. The initiator accepts every length sent.
func TestCookieReplyLengths(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	cc := NewCookieChecker()
	src := netip.MustParseAddrPort("192.0.2.1:51820")
	lens := sampleLens{60, 80, 92, 300, 700, 1460}
	in, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	got := map[int]int{}
	for range 300 {
		reply, err := p.b.CookieReplyClassified(d1, HandshakeKey{&p.b.wk}, cc, src, t0, lens)
		if err != nil {
			t.Fatal(err)
		}
		if len(reply) > len(d1) || !slices.Contains(lens, len(reply)) || !CookieReplyLen(len(reply)) {
			t.Fatalf("cookie reply of %d bytes to a %d-byte initiation (lengths %v)", len(reply), len(d1), lens)
		}
		got[len(reply)]++
		if _, err := openCookieReply(&in.peer.wk.cookie, reply, in.mac1[:]); err != nil {
			t.Fatalf("%d-byte cookie reply refused: %v", len(reply), err)
		}
	}
	for _, n := range lens {
		if n <= len(d1) && got[n] == 0 {
			t.Fatalf("cookie reply lengths %v: never %d (initiation %d)", got, n, len(d1))
		}
	}
	for range 100 {
		reply, _ := p.b.CookieReplyClassified(d1, HandshakeKey{&p.b.wk}, cc, src, t0, nil)
		if len(reply) > len(d1) || !inBands(len(reply)) {
			t.Fatalf("built-in: cookie reply of %d bytes to a %d-byte initiation", len(reply), len(d1))
		}
	}

	// An older router's initiation: a random receiver index.
	old := oldInitiation(t, p, d1)
	copy(in.mac1[:], mac1Of(old))
	for range 100 {
		for _, d := range []WireLengths{lens, nil} {
			reply, err := p.b.CookieReplyClassified(old, HandshakeKey{&p.b.wk}, cc, src, t0, d)
			if err != nil {
				t.Fatal(err)
			}
			if len(reply) < cookieMinLen || len(reply) > cookieMinLen+32 {
				t.Fatalf("cookie reply of %d bytes to an older router: it accepts 56..88", len(reply))
			}
			if d != nil && len(reply) != 60 && len(reply) != 80 {
				t.Fatalf("cookie reply of %d bytes, not from %v", len(reply), lens)
			}
			if err := in.ConsumeCookieReply(reply, t0); err != nil {
				t.Fatal(err)
			}
			in.cookieTaken.Store(false)
		}
	}
}

// oldInitiation is d (an initiation from a to b) as a router before
// initLongCookies sends it: a random receiver index, mac1 recomputed.
func oldInitiation(t *testing.T, p parties, d []byte) []byte {
	t.Helper()
	d = slices.Clone(d)
	end := len(d) - hsTrailer
	in := d[hsSeedLen:end]
	xorMask(&p.b.wk, d[:hsSeedLen], in)
	binary.BigEndian.PutUint32(in[5:9], 0x1234abcd)
	xorMask(&p.b.wk, d[:hsSeedLen], in)
	macWith(d[end:end+hsMacLen], p.b.wk.mac1Hashes, d[:end])
	if typ, _, _ := p.b.Classify(d); typ != TypeInitiation || longCookies(&p.b.wk, d) {
		t.Fatal("re-sealed initiation")
	}
	return d
}
