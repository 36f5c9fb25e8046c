package crypto

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fixed keys, so that datagrams in the seed corpus stay valid across runs
// and the fuzzer can mutate real messages.
func fuzzParties() parties { return fuzzPartiesPSK(PresharedKey{}) }

// fuzzPartiesPSK is fuzzParties with a PSK (PSK-keyed handshakes).
func fuzzPartiesPSK(psk PresharedKey) parties {
	var ka, kb PrivateKey
	ka[1], kb[1] = 1, 2
	ka.clamp()
	kb.clamp()
	a, b := NewLocal(ka, true), NewLocal(kb, true)
	pa, _ := a.AddPeer(b.PublicKey(), psk)
	pb, _ := b.AddPeer(a.PublicKey(), psk)
	return parties{a, b, pa, pb}
}

func FuzzDeframe(f *testing.F) {
	_, fs, o, fr := lanePair(7)
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	{
		buf := make([]byte, 128)
		f.Add(bytes.Clone(fs.Frame(buf, Header{Kind: KindData, K: 4, R: 1, Pad: 9}, 30)))
		f.Add(bytes.Clone(fs.Frame(buf, Header{Kind: KindParity, K: 4, R: 1, Pad: MinPad}, 1)))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		in := bytes.Clone(d)
		h, sym, err := fr.Deframe(in)
		if err != nil {
			if !bytes.Equal(in, d) {
				t.Fatal("rejected datagram was modified")
			}
		} else {
			if h.Kind > KindControl || len(sym) != len(d)-FrameOverhead-int(h.Pad) || len(sym) == 0 {
				t.Fatalf("accepted bad frame %+v len %d", h, len(sym))
			}
			_, _ = o.OpenSymbol(nil, sym)
		}
		// Any bytes are a valid symbol: frame them and get them back.
		if len(d) > 0 && len(d) < 4096 {
			buf := make([]byte, HeaderLen+len(d)+TagLen)
			copy(buf[HeaderLen:], d)
			hh := Header{Kind: Kind(len(d) % 3), Group: uint32(len(d)), Index: d[0], K: 1, R: 1}
			dg := fs.Frame(buf, hh, len(d))
			gh, gs, err := fr.Deframe(dg)
			if err != nil || gh != hh || !bytes.Equal(gs, d) {
				t.Fatalf("round trip failed: %v", err)
			}
			// And padded by d[0] bytes (if that is a valid Pad).
			if hh.Pad = uint16(d[0]); hh.Pad >= MinPad {
				buf = make([]byte, HeaderLen+len(d)+int(hh.Pad)+TagLen)
				copy(buf[HeaderLen:], d)
				dg = fs.Frame(buf, hh, len(d))
				gh, gs, err = fr.Deframe(dg)
				if err != nil || gh != hh || !bytes.Equal(gs, d) {
					t.Fatalf("padded round trip failed: %v", err)
				}
			}
		}
	})
}

// FuzzHandshake feeds a datagram to a responder whose peer has no PSK and
// to one whose peer has a PSK (PSK-keyed handshakes): wrapped, it is given
// a valid mac1 and mask for the second, so the fuzzer reaches the inner
// parse and the Noise layer of both forms (the seeds wrap the first).
func FuzzHandshake(f *testing.F) {
	p, q := fuzzParties(), fuzzPartiesPSK(PresharedKey{3, 1, 4})
	in, _, _ := p.a.Initiate(p.pa, 1, offer(2, 1), t0)
	inq, _, _ := q.a.Initiate(q.pa, 1, offer(2, 1), t0)
	f.Add([]byte{}, false)
	f.Add(make([]byte, hsMinLen), true)
	f.Fuzz(func(t *testing.T, d []byte, wrap bool) {
		dq := d
		if wrap && len(d) >= 32 && len(d) < 600 {
			typ := byte(msgInit)
			if len(d)%2 == 1 {
				typ = msgResponse
			}
			f := hsFields{typ: typ, receiver: 1, noise: d}
			d = sealHandshake(&p.b.wk, f, nil, nil, hsMaxLen)
			dq = sealHandshake(q.pa.wk, f, nil, nil, hsMaxLen) // a's keys for b: PSK-keyed
			if wk := q.b.match(dq); wk == nil || wk.psk.IsZero() {
				t.Fatal("PSK-keyed handshake not matched under the PSK's key")
			}
		}
		for _, c := range []struct {
			b  *Local
			in *Initiation
			d  []byte
		}{{p.b, in, d}, {q.b, inq, dq}} {
			if len(c.d) > hsMaxLen {
				if c.b.IsHandshake(c.d) {
					t.Fatal("oversized datagram passed the handshake gate")
				}
			}
			c.b.Classify(c.d)
			if inc, err := c.b.ConsumeInitiation(c.d); err == nil {
				if _, _, err := inc.Respond(2, offer(1, 1)); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = c.in.ConsumeResponse(c.d)
			_, _ = c.b.CookieReply(c.d, NewCookieChecker(), netip.MustParseAddrPort("[2001:db8::1]:1"), t0)
		}
	})
}

func FuzzCookieReply(f *testing.F) {
	p := fuzzParties()
	in, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	reply, _ := p.b.CookieReply(d1, NewCookieChecker(), netip.MustParseAddrPort("192.0.2.1:1"), t0)
	f.Add(reply)
	// As long as the initiation: the longest reply it can take.
	long, _ := p.b.CookieReplyClassified(d1, HandshakeKey{&p.b.wk}, NewCookieChecker(), netip.MustParseAddrPort("192.0.2.1:1"), t0, sampleLens{len(d1)})
	f.Add(long)
	f.Fuzz(func(t *testing.T, d []byte) {
		_ = in.ConsumeCookieReply(d, t0)
		cc := NewCookieChecker()
		_ = cc.CheckMac2(d, netip.MustParseAddrPort("192.0.2.1:1"), t0)
	})
}

func FuzzLaneOffer(f *testing.F) {
	f.Add(offer(3, 7).appendTo(nil))
	f.Add(LaneOffer{Ports: []uint16{7, 8, 9}, From: 2}.appendTo(nil))
	f.Fuzz(func(t *testing.T, d []byte) {
		o, err := parseLaneOffer(d)
		if err != nil {
			return
		}
		if o.Lanes() < 1 || o.Lanes() > MaxLanes || o.From < 0 || o.From >= o.Lanes() || o.validate() != nil {
			t.Fatalf("parsed %v from %x", o, d)
		}
		// A current offer re-encodes to the same bytes; a version-1 one
		// (no sending lane) to one that parses the same.
		enc := o.appendTo(nil)
		if d[0] == payloadVersion && !bytes.Equal(enc, d) {
			t.Fatalf("parsed %v from %x, encodes as %x", o, d, enc)
		}
		if o2, err := parseLaneOffer(enc); err != nil || !slices.Equal(o2.Ports, o.Ports) || o2.From != o.From {
			t.Fatalf("%v re-parsed as %v, %v", o, o2, err)
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz from real messages when
// YIP_WRITE_SEEDS=1 (the committed corpus is its output).
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("YIP_WRITE_SEEDS") != "1" {
		t.Skip("set YIP_WRITE_SEEDS=1 to rewrite the seed corpus")
	}
	write := func(target, name string, args ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch v := a.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case bool:
				fmt.Fprintf(&b, "bool(%v)\n", v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, fs, _, _ := lanePair(7)
	buf := make([]byte, 256)
	write("FuzzDeframe", "data", sealFrame(t, s, &fs, buf, []byte("E\x00\x00\x14inner packet"), Header{K: 8, R: 2}))
	buf = make([]byte, 256)
	copy(buf[HeaderLen:], "parity")
	write("FuzzDeframe", "parity", fs.Frame(buf, Header{Kind: KindParity, Index: 8, K: 8, R: 2}, 6))
	write("FuzzDeframe", "short", []byte("0123456789abcdef"))

	p := fuzzParties()
	_, d1, _ := p.a.Initiate(p.pa, 1, offer(2, 1), t0.Add(time.Hour))
	inc, _ := p.b.ConsumeInitiation(d1)
	d2, _, _ := inc.Respond(2, offer(1, 1))
	write("FuzzHandshake", "initiation", d1, false)
	write("FuzzHandshake", "response", d2, false)
	write("FuzzHandshake", "inner", bytes.Repeat([]byte{7}, 96), true)

	in, d1, _ := p.a.Initiate(p.pa, 1, offer(1, 1), t0)
	_ = in
	reply, _ := p.b.CookieReply(d1, NewCookieChecker(), netip.MustParseAddrPort("192.0.2.1:1"), t0)
	write("FuzzCookieReply", "reply", reply)
	write("FuzzCookieReply", "initiation", d1)

	write("FuzzLaneOffer", "one", offer(1, 51820).appendTo(nil))
	write("FuzzLaneOffer", "max", offer(MaxLanes, 1).appendTo(nil))
	write("FuzzLaneOffer", "badversion", []byte{9, 1, 0, 1})
}

// FuzzParseKey: key text comes from config files and stdin; no input may
// panic, and what parses must print back to itself (after clamping).
func FuzzParseKey(f *testing.F) {
	f.Add("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	f.Add("00000000000000000000000000000000000000000000")
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := ParsePrivateKey(s); err == nil {
			if k2, err := ParsePrivateKey(k.String()); err != nil || k2 != k {
				t.Fatalf("private key %q does not round-trip", s)
			}
		}
		if k, err := ParsePublicKey(s); err == nil && k.String() != strings.TrimSpace(s) {
			t.Fatalf("public key %q prints as %q", s, k.String())
		}
		_, _ = ParsePresharedKey(s)
	})
}
