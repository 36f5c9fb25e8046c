package main

// A simulated WireGuard peer: the burst against wireguard-go, the anchor
// the yip-router burst is a ratio to.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/flynn/noise"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/yip-router/yip-router/internal/flood"
)

const (
	// wgIdentifier is WireGuard's Noise prologue.
	wgIdentifier = "WireGuard v1 zx2c4 Jason@zx2c4.com"
	// wgCookieLife is how long an initiator uses a cookie
	// (wireguard-go's CookieRefreshTime).
	wgCookieLife = 120 * time.Second
	// tai64Base is TAI64's label of the Unix epoch: 2^62 plus TAI's 10
	// seconds ahead of UTC then (wireguard-go tai64n.base).
	tai64Base = 0x400000000000000a
)

// wgSuite gives flynn/noise WireGuard's protocol name with the IK
// pattern and psk2: Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s. Longer than
// BLAKE2s's 32 bytes, so flynn/noise hashes it (Ci = Hi = HASH(name)),
// then mixes the prologue and the responder's static key into Hi, as
// WireGuard does.
var wgSuite = noise.NewCipherSuite(noise.DH25519, noise.CipherChaChaPoly, noise.HashBLAKE2s)

// wgNoise is the Noise configuration of a WireGuard handshake: IK with a
// zero preshared key mixed in at placement 2. peer is the other side's
// static public key (the initiator's; the responder learns it).
func wgNoise(initiator bool, static noise.DHKey, peer []byte, rng io.Reader) (*noise.HandshakeState, error) {
	return noise.NewHandshakeState(noise.Config{
		CipherSuite: wgSuite, Pattern: noise.HandshakeIK, Initiator: initiator, Random: rng,
		Prologue: []byte(wgIdentifier), PresharedKey: make([]byte, 32), PresharedKeyPlacement: 2,
		StaticKeypair: static, PeerStatic: peer,
	})
}

// wgHubKeys is what every peer derives from the hub's public key.
type wgHubKeys struct {
	pub    [32]byte
	mac1   [32]byte // the initiations' mac1 key
	cookie [32]byte // the cookie replies' key
}

func newWGHubKeys(pub [32]byte) *wgHubKeys {
	return &wgHubKeys{pub: pub, mac1: flood.WGMAC1Key(pub), cookie: flood.WGCookieKey(pub)}
}

// wgPeer is a simulated peer's side of WireGuard's handshake (hsProto),
// as a WireGuard initiator does it: one initiation in flight, a new one
// replacing it (its sender index, and the mac1 a cookie reply is sealed
// to: wireguard-go's CookieGenerator keeps the last), each with a
// strictly newer timestamp (the responder drops a replay). No session:
// wireguard-go only takes the burst.
type wgPeer struct {
	i       int
	static  noise.DHKey
	hub     *wgHubKeys
	respKey [32]byte  // the responses' mac1 key (under this peer's public key)
	rng     io.Reader // ephemerals; nil: crypto/rand

	attempt int
	hs      *noise.HandshakeState // the initiation in flight, nil after finish
	index   uint32                // its sender index
	mac1    [16]byte              // its mac1
	last    time.Time             // its timestamp
	cookie  [16]byte
	cookied time.Time // when the cookie came; zero: none
}

// newWGPeers makes n WireGuard peers with fresh keys, placed as newPeers
// places yip-router's.
func newWGPeers(n int, hub *wgHubKeys, shards int, spread bool) ([]*simPeer, error) {
	peers := make([]*simPeer, n)
	err := parallel(n, func(i int) error {
		k, err := noise.DH25519.GenerateKeypair(rand.Reader)
		if err != nil {
			return err
		}
		p := newSimPeer(i, shards, spread)
		p.proto = &wgPeer{i: i, static: k, hub: hub, respKey: flood.WGMAC1Key([32]byte(k.Public))}
		peers[i] = p
		return nil
	})
	return peers, err
}

// initiate builds a type-1 message: the Noise IK first message (e, s, es,
// ss, the TAI64N timestamp as payload) between type and sender index and
// the MACs; mac2 when a cookie younger than wgCookieLife is held.
func (w *wgPeer) initiate(now time.Time) ([]byte, error) {
	hs, err := wgNoise(true, w.static, w.hub.pub[:], w.rng)
	if err != nil {
		return nil, err
	}
	idx := uint32(w.i)<<8 | uint32(w.attempt&0xff)
	w.attempt++
	ts := now.Round(0) // wall clock only
	if !ts.After(w.last) {
		ts = w.last.Add(time.Nanosecond)
	}
	stamp := tai64n(ts)
	m := make([]byte, 8, flood.WGInitiationLen)
	binary.LittleEndian.PutUint32(m, flood.WGInitiationType)
	binary.LittleEndian.PutUint32(m[4:], idx)
	if m, _, _, err = hs.WriteMessage(m, stamp[:]); err != nil {
		return nil, err
	}
	if len(m) != flood.WGInitiationLen-32 {
		return nil, errors.New("wg: initiation of the wrong length")
	}
	m = append(m, make([]byte, 32)...) // mac1, mac2
	mac1 := flood.WGMAC1(w.hub.mac1, m)
	copy(m[flood.WGInitiationLen-32:], mac1[:])
	if !w.cookied.IsZero() && now.Sub(w.cookied) < wgCookieLife {
		mac2 := flood.WGMAC2(w.cookie, m)
		copy(m[flood.WGInitiationLen-16:], mac2[:])
	}
	w.hs, w.index, w.mac1, w.last = hs, idx, mac1, ts
	return m, nil
}

// tai64n is t as a TAI64N label: seconds (TAI64, big endian), then
// nanoseconds (big endian). wireguard-go rounds its own down to 2^24 ns;
// it compares ours as bytes.
func tai64n(t time.Time) [12]byte {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:], tai64Base+uint64(t.Unix()))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return b
}

func (w *wgPeer) reset() { w.hs = nil }

// consumeCookie opens a cookie reply to the initiation in flight: its
// receiver index is the initiation's sender index, its cookie sealed with
// the hub's cookie key, the reply's nonce, and the initiation's mac1 as
// additional data.
func (w *wgPeer) consumeCookie(d []byte, now time.Time) bool {
	if w.hs == nil || len(d) != flood.WGCookieReplyLen || binary.LittleEndian.Uint32(d) != flood.WGCookieReplyType ||
		binary.LittleEndian.Uint32(d[4:]) != w.index {
		return false
	}
	aead, err := chacha20poly1305.NewX(w.hub.cookie[:])
	if err != nil {
		return false
	}
	ck, err := aead.Open(nil, d[8:8+chacha20poly1305.NonceSizeX], d[8+chacha20poly1305.NonceSizeX:], w.mac1[:])
	if err != nil {
		return false
	}
	w.cookie, w.cookied = [16]byte(ck), now
	return true
}

// isResponse: a type-2 message to the initiation in flight (its receiver
// index the initiation's sender index).
func (w *wgPeer) isResponse(d []byte) bool {
	return w.hs != nil && len(d) == flood.WGResponseLen && binary.LittleEndian.Uint32(d) == flood.WGResponseType &&
		binary.LittleEndian.Uint32(d[8:]) == w.index
}

// finish checks the response's mac1 (under this peer's key) and reads the
// Noise IK second message (e, ee, se, psk, an empty payload) with the
// initiation's state, which it uses up.
func (w *wgPeer) finish(d []byte) bool {
	if !w.isResponse(d) || flood.WGMAC1(w.respKey, d) != [16]byte(d[flood.WGResponseLen-32:]) {
		return false
	}
	hs := w.hs
	w.hs = nil
	payload, c1, c2, err := hs.ReadMessage(nil, d[12:flood.WGResponseLen-32])
	return err == nil && len(payload) == 0 && c1 != nil && c2 != nil
}
