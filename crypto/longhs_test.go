package crypto

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// longLens is a sampleLens whose receiver said it takes long handshakes.
type longLens struct{ sampleLens }

func (longLens) LongHandshakes() bool { return true }

// An initiation to a receiver known to take long handshakes draws from
// all its data lengths, up to hsMaxLen; the response and a cookie reply to
// it may be as long as it is. Without that knowledge the initiation stays
// within hsLegacyMax, and so do the response and cookie reply to it.
func TestLongHandshakes(t *testing.T) {
	p := newParties(t, PresharedKey{}, true)
	full := sampleLens{1200, 1460, 1600}
	p.pa.SetWireLengths(longLens{full})
	p.pb.SetWireLengths(sampleLens{1300, 1500})
	cc := NewCookieChecker()
	src := netip.MustParseAddrPort("192.0.2.1:51820")
	seen := map[int]bool{}
	for i := range 60 {
		in, d1, err := p.a.Initiate(p.pa, 11, offer(4, 5000), t0.Add(time.Duration(i)))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(full, len(d1)) {
			t.Fatalf("initiation of %d bytes, not one of %v", len(d1), full)
		}
		seen[len(d1)] = true
		reply, err := p.b.CookieReplyClassified(d1, HandshakeKey{&p.b.wk}, cc, src, t0, full)
		if err != nil || len(reply) > len(d1) || !CookieReplyLen(len(reply)) {
			t.Fatalf("cookie reply of %d bytes to a %d-byte initiation: %v", len(reply), len(d1), err)
		}
		if _, err := openCookieReply(&in.peer.wk.cookie, reply, in.mac1[:]); err != nil {
			t.Fatalf("%d-byte cookie reply refused: %v", len(reply), err)
		}
		inc, err := p.b.ConsumeInitiation(d1)
		if err != nil {
			t.Fatalf("%d-byte initiation refused: %v", len(d1), err)
		}
		d2, _, err := inc.Respond(22, offer(2, 6000))
		if err != nil {
			t.Fatal(err)
		}
		if len(d2) > len(d1)+PadHeadroom || len(d2) <= hsLegacyMax && len(d1) >= 1300 {
			t.Fatalf("response of %d bytes to a %d-byte initiation (responder's lengths 1300, 1500)", len(d2), len(d1))
		}
		if _, err := in.ConsumeResponse(d2); err != nil {
			t.Fatalf("%d-byte response refused: %v", len(d2), err)
		}
	}
	if len(seen) != len(full) {
		t.Fatalf("initiation lengths %v from %v", seen, full)
	}
	// The same lengths without the receiver's word: none fits, so the
	// built-in distribution within hsLegacyMax.
	p.pa.SetWireLengths(full)
	for i := range 60 {
		_, d1, err := p.a.Initiate(p.pa, 11, offer(4, 5000), t0.Add(time.Duration(1000+i)))
		if err != nil || len(d1) > hsLegacyMax {
			t.Fatalf("%d-byte initiation to a receiver not known to take more than %d: %v", len(d1), hsLegacyMax, err)
		}
	}
}

// A response may be up to PadHeadroom longer than its initiation, never
// beyond what the initiator's version takes.
func TestRespMaxLen(t *testing.T) {
	for init, want := range map[int]int{100: 132, 1000: 1024, 1024: 1024, 1025: 1057, 1500: 1532, 1650: hsMaxLen} {
		if got := respMaxLen(init); got != want {
			t.Errorf("respMaxLen(%d) = %d, want %d", init, got, want)
		}
	}
}
