package main

// The simulated WireGuard peer against a responder written here from the
// protocol (the WireGuard paper, section 5.4, and wireguard-go's message
// layout), not from wgpeer.go: Noise through flynn/noise on the
// responder's side, MACs and cookies with golang.org/x/crypto directly,
// and the initiation also opened step by step without flynn/noise, so
// flynn/noise's handling of the protocol name and prologue is checked
// against WireGuard's Ci = HASH(CONSTRUCTION), Hi = HASH(Ci ‖ IDENTIFIER).

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"fmt"
	"hash"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/flynn/noise"
	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/curve25519"
)

// wgResponder is the hub's side: its static key and flynn/noise.
type wgResponder struct {
	t      *testing.T
	static noise.DHKey
	rng    *rand.ChaCha8
}

func newWGResponder(t *testing.T, seed byte) *wgResponder {
	rng := rand.NewChaCha8([32]byte{seed})
	k, err := noise.DH25519.GenerateKeypair(rng)
	if err != nil {
		t.Fatal(err)
	}
	return &wgResponder{t: t, static: k, rng: rng}
}

func (r *wgResponder) keys() *wgHubKeys { return newWGHubKeys([32]byte(r.static.Public)) }

func (r *wgResponder) peer(i int) *wgPeer {
	r.t.Helper()
	peers, err := newWGPeers(i+1, r.keys(), 1, false)
	if err != nil {
		r.t.Fatal(err)
	}
	w := peers[i].proto.(*wgPeer)
	w.rng = rand.NewChaCha8([32]byte{byte(i), 1})
	return w
}

// blake2s128 is keyed BLAKE2s with a 16-byte digest.
func blake2s128(key, b []byte) []byte {
	h, err := blake2s.New128(key)
	if err != nil {
		panic(err)
	}
	h.Write(b)
	return h.Sum(nil)
}

// labelKey is HASH(label ‖ pub).
func labelKey(label string, pub []byte) []byte {
	k := blake2s.Sum256(append([]byte(label), pub...))
	return k[:]
}

// consume checks an initiation as wireguard-go's receive path does: its
// length, type, mac1 under the responder's key, then reads the Noise
// message; it returns the initiator's static key, the timestamp and the
// Noise state for the response. (Errors, not t.Fatal: the driver test
// calls it on the hub's goroutine.)
func (r *wgResponder) consume(m []byte) (static, ts []byte, hs *noise.HandshakeState, err error) {
	if len(m) != 148 || binary.LittleEndian.Uint32(m) != 1 {
		return nil, nil, nil, fmt.Errorf("initiation: %d bytes, type %d", len(m), binary.LittleEndian.Uint32(m))
	}
	if want := blake2s128(labelKey("mac1----", r.static.Public), m[:116]); !bytes.Equal(m[116:132], want) {
		return nil, nil, nil, fmt.Errorf("initiation's mac1 %x, want %x", m[116:132], want)
	}
	hs, err = noise.NewHandshakeState(noise.Config{
		CipherSuite: noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashBLAKE2s),
		Pattern:     noise.HandshakeIK, Initiator: false, Random: r.rng,
		Prologue:     []byte("WireGuard v1 zx2c4 Jason@zx2c4.com"),
		PresharedKey: make([]byte, 32), PresharedKeyPlacement: 2, StaticKeypair: r.static,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if ts, _, _, err = hs.ReadMessage(nil, m[8:116]); err != nil {
		return nil, nil, nil, fmt.Errorf("responder's ReadMessage: %w", err)
	}
	return hs.PeerStatic(), ts, hs, nil
}

// mustConsume is consume on the test's goroutine.
func (r *wgResponder) mustConsume(m []byte) (static, ts []byte) {
	r.t.Helper()
	static, ts, _, err := r.consume(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return static, ts
}

// respond is the type-2 message to initiation m: sender 7, receiver m's
// sender, the Noise second message, mac1 under the initiator's key.
func (r *wgResponder) respond(m []byte) ([]byte, error) {
	static, _, hs, err := r.consume(m)
	if err != nil {
		return nil, err
	}
	resp := make([]byte, 12, 92)
	binary.LittleEndian.PutUint32(resp, 2)
	binary.LittleEndian.PutUint32(resp[4:], 7)
	copy(resp[8:12], m[4:8])
	if resp, _, _, err = hs.WriteMessage(resp, nil); err != nil || len(resp) != 60 {
		return nil, fmt.Errorf("responder's WriteMessage: %d bytes, %v", len(resp), err)
	}
	resp = append(resp, make([]byte, 32)...)
	copy(resp[60:76], blake2s128(labelKey("mac1----", static), resp[:60]))
	return resp, nil
}

func (r *wgResponder) mustRespond(m []byte) []byte {
	r.t.Helper()
	resp, err := r.respond(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// cookieReply is the type-3 answer to m carrying cookie: the cookie
// sealed with XChaCha20-Poly1305 under HASH("cookie--" ‖ responder's
// public key), a random nonce, m's mac1 as additional data.
func (r *wgResponder) cookieReply(m []byte, cookie []byte) []byte {
	aead, _ := chacha20poly1305.NewX(labelKey("cookie--", r.static.Public)) // a 32-byte key
	reply := make([]byte, 32, 64)
	binary.LittleEndian.PutUint32(reply, 3)
	copy(reply[4:8], m[4:8])
	_, _ = r.rng.Read(reply[8:32])
	return aead.Seal(reply, reply[8:32], cookie, m[116:132])
}

// specConsume opens initiation m as the WireGuard paper's responder
// does, with golang.org/x/crypto alone: the encrypted static key and
// timestamp.
func specConsume(t *testing.T, priv, pub, m []byte) (static, ts []byte) {
	t.Helper()
	hashOf := func(parts ...[]byte) []byte {
		h, _ := blake2s.New256(nil)
		for _, p := range parts {
			h.Write(p)
		}
		return h.Sum(nil)
	}
	mac := func(key []byte, parts ...[]byte) []byte {
		h := hmac.New(func() hash.Hash { h, _ := blake2s.New256(nil); return h }, key)
		for _, p := range parts {
			h.Write(p)
		}
		return h.Sum(nil)
	}
	kdf2 := func(ck, in []byte) (ck2, key []byte) {
		prk := mac(ck, in)
		ck2 = mac(prk, []byte{1})
		return ck2, mac(prk, ck2, []byte{2})
	}
	open := func(key, sealed, ad []byte) []byte {
		aead, _ := chacha20poly1305.New(key)
		pt, err := aead.Open(nil, make([]byte, 12), sealed, ad)
		if err != nil {
			t.Fatalf("spec responder: %v", err)
		}
		return pt
	}
	ck := hashOf([]byte("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"))
	h := hashOf(ck, []byte("WireGuard v1 zx2c4 Jason@zx2c4.com"))
	h = hashOf(h, pub)
	e := m[8:40]
	h = hashOf(h, e)
	ck, _ = kdf2(ck, e) // psk mode: the ephemeral is mixed into the key too
	es, _ := curve25519.X25519(priv, e)
	ck, k := kdf2(ck, es)
	static = open(k, m[40:88], h)
	h = hashOf(h, m[40:88])
	ss, _ := curve25519.X25519(priv, static)
	_, k = kdf2(ck, ss)
	return static, open(k, m[88:116], h)
}

func TestWGInitiationAccepted(t *testing.T) {
	r := newWGResponder(t, 1)
	w := r.peer(3)
	before := time.Now()
	m, err := w.initiate(before)
	if err != nil {
		t.Fatal(err)
	}
	if idx := binary.LittleEndian.Uint32(m[4:]); idx != 3<<8 {
		t.Fatalf("sender index %#x", idx)
	}
	if !bytes.Equal(m[132:], make([]byte, 16)) {
		t.Fatalf("mac2 %x without a cookie", m[132:])
	}
	static, ts := r.mustConsume(m)
	if !bytes.Equal(static, w.static.Public) {
		t.Fatalf("responder read static %x, want %x", static, w.static.Public)
	}
	sec := int64(binary.BigEndian.Uint64(ts) - 0x400000000000000a)
	if len(ts) != 12 || sec < before.Unix()-1 || sec > before.Unix()+1 {
		t.Fatalf("timestamp %x: not TAI64N of %s", ts, before)
	}
	static2, ts2 := specConsume(t, r.static.Private, r.static.Public, m)
	if !bytes.Equal(static2, static) || !bytes.Equal(ts2, ts) {
		t.Fatalf("the paper's responder read static %x, timestamp %x; flynn/noise's %x, %x", static2, ts2, static, ts)
	}
}

func TestWGResponse(t *testing.T) {
	r := newWGResponder(t, 2)
	w := r.peer(0)
	fresh := func() []byte {
		m, err := w.initiate(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r.mustRespond(m)
	}
	bad := map[string]func(d []byte){
		"receiver of another initiation": func(d []byte) { d[8]++ },
		"mac1":                           func(d []byte) { d[60] ^= 1 },
		"encrypted nothing": func(d []byte) {
			d[50] ^= 1
			copy(d[60:76], blake2s128(labelKey("mac1----", w.static.Public), d[:60]))
		},
	}
	for name, spoil := range bad {
		d := fresh()
		spoil(d)
		if w.finish(d) {
			t.Errorf("a response with a bad %s finished", name)
		}
	}
	d := fresh()
	if !w.isResponse(d) || !w.finish(d) {
		t.Fatal("a good response not taken")
	}
	if w.isResponse(d) || w.finish(d) {
		t.Fatal("the response taken twice")
	}
	// A response to an initiation the peer replaced is not taken.
	m1, _ := w.initiate(time.Now())
	d = r.mustRespond(m1)
	if _, err := w.initiate(time.Now()); err != nil {
		t.Fatal(err)
	}
	if w.isResponse(d) || w.finish(d) {
		t.Fatal("a response to a replaced initiation taken")
	}
}

func TestWGCookieReply(t *testing.T) {
	r := newWGResponder(t, 3)
	w := r.peer(1)
	now := time.Now()
	m1, _ := w.initiate(now)
	cookie := []byte("0123456789abcdef")
	other, _ := r.peer(2).initiate(now) // another initiation's mac1 and index
	if w.consumeCookie(r.cookieReply(other, cookie), now) {
		t.Fatal("a cookie reply to another initiation consumed")
	}
	// m1's index, the other's mac1 as additional data.
	wrongAD := r.cookieReply(append(bytes.Clone(m1[:116]), other[116:]...), cookie)
	if w.consumeCookie(wrongAD, now) {
		t.Fatal("a cookie sealed to another mac1 consumed")
	}
	// m1's mac1, the other's index.
	if w.consumeCookie(r.cookieReply(append(bytes.Clone(other[:116]), m1[116:]...), cookie), now) {
		t.Fatal("a cookie reply to another index consumed")
	}
	if !w.consumeCookie(r.cookieReply(m1, cookie), now) {
		t.Fatal("the cookie reply not consumed")
	}
	m2, _ := w.initiate(now) // the same clock: the timestamp must still move
	if want := blake2s128(cookie, m2[:132]); !bytes.Equal(m2[132:], want) {
		t.Fatalf("mac2 %x, want %x", m2[132:], want)
	}
	_, ts1 := r.mustConsume(m1)
	_, ts2 := r.mustConsume(m2)
	if bytes.Compare(ts2, ts1) <= 0 {
		t.Fatalf("timestamp %x after %x: not newer", ts2, ts1)
	}
	if binary.LittleEndian.Uint32(m2[4:]) == binary.LittleEndian.Uint32(m1[4:]) {
		t.Fatal("the retry reuses the sender index")
	}
	if w.consumeCookie(r.cookieReply(m1, cookie), now) {
		t.Fatal("a cookie reply to the replaced initiation consumed")
	}
	// A new cookie for the retry replaces the first.
	cookie2 := []byte("a second cookie!")
	if !w.consumeCookie(r.cookieReply(m2, cookie2), now) {
		t.Fatal("a cookie reply to the retry not consumed")
	}
	if m3, _ := w.initiate(now); !bytes.Equal(m3[132:], blake2s128(cookie2, m3[:132])) {
		t.Fatal("mac2 not under the newer cookie")
	}
	if m3, _ := w.initiate(now.Add(wgCookieLife)); !bytes.Equal(m3[132:], make([]byte, 16)) {
		t.Fatal("mac2 from an expired cookie")
	}
}

func TestTAI64N(t *testing.T) {
	got := tai64n(time.Unix(1, 5))
	want := []byte{0x40, 0, 0, 0, 0, 0, 0, 0x0b, 0, 0, 0, 5}
	if !bytes.Equal(got[:], want) {
		t.Fatalf("tai64n = %x, want %x", got, want)
	}
}

// The generator's handshake loop over loopback UDP against a responder
// that demands a cookie first, as wireguard-go under load does: one
// cookie reply, a retry with mac2 at once, the response kept and opened
// after.
func TestWGHandshakeDriver(t *testing.T) {
	r := newWGResponder(t, 4)
	hubConn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip("no loopback UDP: ", err)
	}
	defer hubConn.Close()
	p := &simPeer{i: 5, proto: r.peer(5)}
	if p.conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	defer p.conn.Close()
	cookie := []byte("fedcba9876543210")
	hubErr := make(chan string, 1)
	go func() {
		buf := make([]byte, 256)
		for range 2 {
			_ = hubConn.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, from, err := hubConn.ReadFromUDPAddrPort(buf)
			if err != nil {
				hubErr <- err.Error()
				return
			}
			m := buf[:n]
			var out []byte
			switch {
			case bytes.Equal(m[132:], make([]byte, 16)):
				out = r.cookieReply(m, cookie)
			case bytes.Equal(m[132:], blake2s128(cookie, m[:132])):
				if out, err = r.respond(m); err != nil {
					hubErr <- err.Error()
					return
				}
			default:
				hubErr <- "an initiation with a wrong mac2"
				return
			}
			_, _ = hubConn.WriteToUDPAddrPort(out, from)
		}
		hubErr <- ""
	}()
	if err := p.prebuild(); err != nil {
		t.Fatal(err)
	}
	var st hsStats
	p.handshake(hubConn.LocalAddr().(*net.UDPAddr).AddrPort(), true, time.Now().Add(5*time.Second), &st)
	if e := <-hubErr; e != "" {
		t.Fatal("hub: ", e)
	}
	if st.done.Load() != 1 || st.cookies.Load() != 1 || st.sent.Load() != 2 || st.timeouts.Load() != 0 || st.other.Load() != 0 {
		t.Fatalf("done %d, cookies %d, sent %d, timeouts %d, other %d; want 1, 1, 2, 0, 0",
			st.done.Load(), st.cookies.Load(), st.sent.Load(), st.timeouts.Load(), st.other.Load())
	}
	if !p.finishResponse() {
		t.Fatal("the kept response did not open")
	}
}
