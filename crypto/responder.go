package crypto

// The responder's side of the handshake: Classify tells what a datagram
// that matched no lane is, CookieReply answers under load without a DH,
// ConsumeInitiation authenticates an initiation and Respond completes the
// session.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/flynn/noise"
)

// HandshakeType is what a handshake datagram addressed to us is.
type HandshakeType int

// Types returned by Classify.
const (
	NotHandshake HandshakeType = iota
	TypeInitiation
	TypeResponse
)

// HandshakeKey is the key of ours a datagram's mac1 matched (Classify):
// opaque, for CookieReplyClassified.
type HandshakeKey struct{ wk *wireKeys }

// Classify tells a router what a datagram that matched no data lane is: an
// initiation, a response (with the index of the initiation it answers, so
// the router can find it), or not a handshake for us, and the key its mac1
// matched. It costs a BLAKE2s per handshake key (HandshakeKeys; the first
// that matches ends the search) and, if mac1 matches, an XChaCha20 over the
// inner header; no DH, no allocation.
func (l *Local) Classify(dgram []byte) (HandshakeType, uint32, HandshakeKey) {
	wk := l.match(dgram)
	if wk == nil {
		return NotHandshake, 0, HandshakeKey{}
	}
	// Only the inner header is unmasked (type, indices, Noise length),
	// into a stack buffer: a flood of initiations costs no allocation
	// here. checkMac1 guaranteed the length.
	var hdr [hsInnerHdr]byte
	copy(hdr[:], dgram[hsSeedLen:])
	xorMask(wk, dgram[:hsSeedLen], hdr[:])
	n := int(binary.BigEndian.Uint16(hdr[9:11]))
	if n < 32 || hsSeedLen+hsInnerHdr+n > len(dgram)-hsTrailer {
		return NotHandshake, 0, HandshakeKey{}
	}
	f := hsFields{typ: hdr[0], receiver: binary.BigEndian.Uint32(hdr[5:9])}
	switch f.typ {
	case msgInit:
		return TypeInitiation, 0, HandshakeKey{wk}
	case msgResponse:
		return TypeResponse, f.receiver, HandshakeKey{wk}
	}
	return NotHandshake, 0, HandshakeKey{}
}

// IsHandshake is the cheap gate a receiver runs on a datagram that matched
// no data lane: a valid mac1 under one of our handshake keys. No DH, no
// unmasking.
func (l *Local) IsHandshake(dgram []byte) bool { return l.match(dgram) != nil }

// Incoming is a consumed initiation waiting for our response.
type Incoming struct {
	local *Local
	peer  *Peer
	hs    *noise.HandshakeState
	index uint32 // the initiator's index
	offer LaneOffer
	ts    Timestamp
	// initLen is the initiation's length, which bounds the response's
	// (respMaxLen).
	initLen int
}

// Peer is the authenticated initiator.
func (in *Incoming) Peer() *Peer { return in.peer }

// respMaxLen caps a response to an initiation of initLen bytes: up to
// PadHeadroom bytes longer, so that responses to initiations at the bottom
// of a band of padded lengths do not pile up there (capped strictly at the
// initiation, they were the one handshake length that stood out), and
// within hsLegacyMax when the initiation was (it may come from a router
// that takes no more). No amplification an attacker can use: a response
// answers only an initiation that authenticated and is no replay.
func respMaxLen(initLen int) int {
	if initLen <= hsLegacyMax {
		return min(initLen+PadHeadroom, hsLegacyMax)
	}
	return min(initLen+PadHeadroom, hsMaxLen)
}

// CookieReply answers an initiation (mac1 valid) from src with a cookie
// instead of doing any DH: what a responder under load sends. It never
// returns a datagram longer than the initiation. Its length is drawn from
// the built-in distribution (CookieReplyClassified takes another).
func (l *Local) CookieReply(initiation []byte, c *CookieChecker, src netip.AddrPort, now time.Time) ([]byte, error) {
	wk := l.match(initiation)
	if wk == nil {
		return nil, ErrMac1
	}
	return l.CookieReplyClassified(initiation, HandshakeKey{wk}, c, src, now, nil)
}

// CookieReplyClassified is CookieReply for an initiation that Classify has
// just accepted under key (its mac1 verified): it does not verify mac1
// again, which under a flood of initiations is a third of the work. The
// reply is sealed under key's cookie key, which is PSK-keyed when key is:
// only an initiator holding the PSK opens it. Its length is drawn from lens
// (nil: the built-in distribution) among the lengths from the shortest
// reply up to the initiation's length, and up to cookieOldMax unless the
// initiation says its sender accepts longer (initLongCookies).
func (l *Local) CookieReplyClassified(initiation []byte, key HandshakeKey, c *CookieChecker, src netip.AddrPort, now time.Time, lens WireLengths) ([]byte, error) {
	if key.wk == nil {
		return nil, ErrMac1
	}
	if len(initiation) < hsMinLen {
		return nil, ErrHandshake
	}
	maxLen := cookieOldMax
	if longCookies(key.wk, initiation) {
		maxLen = hsMaxLen
	}
	return sealCookieReply(key.wk.cookieAEAD, c.Cookie(src, now), initiation, lens, maxLen)
}

// ConsumeInitiation authenticates an initiation addressed to us. It refuses
// unknown initiators and replays (timestamp not newer than the last accepted
// from that peer). The caller decides beforehand whether to demand a cookie
// (CookieChecker.CheckMac2).
func (l *Local) ConsumeInitiation(dgram []byte) (*Incoming, error) {
	wk := l.match(dgram)
	if wk == nil {
		return nil, ErrMac1
	}
	f, err := openHandshake(wk, dgram)
	if err != nil {
		return nil, err
	}
	if f.typ != msgInit {
		return nil, ErrHandshake
	}
	if isLowOrder(f.noise[:KeyLen]) {
		return nil, ErrLowOrder // before spending a DH on it
	}
	hs, err := noise.NewHandshakeState(l.config(false))
	if err != nil {
		return nil, fmt.Errorf("crypto: handshake state: %w", err)
	}
	payload, _, _, err := hs.ReadMessage(nil, f.noise)
	if err != nil {
		return nil, fmt.Errorf("crypto: read initiation: %w", err)
	}
	peer := l.Peer(PublicKey(hs.PeerStatic()))
	if peer == nil {
		return nil, ErrUnknownPeer
	}
	// The key mac1 matched must be the one this peer uses with us: an
	// initiation keyed by another peer's PSK, or by the public key only
	// for a peer with a PSK (and no LegacyMAC), or by its PSK for a
	// LegacyMAC peer, is refused before it can move the peer's timestamp
	// or draw a response. (Noise would refuse a wrong PSK only at the
	// initiator, after our response had gone out.)
	if !peer.accepts(wk) {
		return nil, ErrWrongKeys
	}
	if len(payload) < TAI64NLen {
		return nil, ErrPayload
	}
	ts := Timestamp(payload[:TAI64NLen])
	offer, err := parseLaneOffer(payload[TAI64NLen:])
	if err != nil {
		return nil, err
	}
	peer.mu.Lock()
	fresh := ts.After(peer.lastTS)
	if fresh {
		peer.lastTS = ts
	}
	peer.mu.Unlock()
	if !fresh {
		return nil, ErrStaleTimestamp
	}
	if err := hs.SetPresharedKey(peer.psk[:]); err != nil {
		return nil, err
	}
	return &Incoming{local: l, peer: peer, hs: hs, index: f.sender, offer: offer, ts: ts, initLen: len(dgram)}, nil
}

// Respond completes the handshake: index is our session index, answer our
// lanes. It returns the response datagram and the session. The response's
// length is drawn from the peer's distribution (SetWireLengths) among the
// lengths it can take up to the initiation's length.
func (in *Incoming) Respond(index uint32, answer LaneOffer) ([]byte, *Session, error) {
	if err := answer.validate(); err != nil {
		return nil, nil, err
	}
	answer.version = in.offer.version // answer in the initiator's encoding
	msg, cs1, cs2, err := in.hs.WriteMessage(nil, answer.appendTo(nil))
	if err != nil {
		return nil, nil, fmt.Errorf("crypto: write response: %w", err)
	}
	if cs1 == nil || cs2 == nil {
		return nil, nil, ErrHandshake
	}
	dgram := sealHandshake(in.peer.wk, hsFields{typ: msgResponse, sender: index, receiver: in.index, noise: msg},
		nil, in.peer.wireLengths(), respMaxLen(in.initLen))
	return dgram, &Session{Peer: in.peer, Keys: sessionFrom(cs1, cs2, false), Initiator: false,
		LocalIndex: index, RemoteIndex: in.index, Remote: in.offer}, nil
}
