package crypto

// The handshake's outcome (Session), its errors, and the initiator's side:
// Initiate, then a cookie reply or the response that completes it. The
// identity and peers both sides use are in local.go, the responder's side
// in responder.go.

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flynn/noise"
)

// CookieValidity is how long an initiator uses a cookie it was given.
const CookieValidity = CookieSlot

var (
	// ErrUnknownPeer means an initiation authenticated a static key that is
	// not configured.
	ErrUnknownPeer = errors.New("crypto: initiation from an unknown peer")
	// ErrStaleTimestamp means the initiation's timestamp is not newer than
	// the last accepted one from that peer: a replay.
	ErrStaleTimestamp = errors.New("crypto: replayed initiation (timestamp not newer)")
	// ErrNotForThisInitiation means a response does not answer our initiation.
	ErrNotForThisInitiation = errors.New("crypto: response does not match the pending initiation")
	// ErrLowOrder means a handshake carried a low-order ephemeral key (a
	// forgery: its DH would be all zeros).
	ErrLowOrder = errors.New("crypto: low-order ephemeral key")
	// ErrWrongKeys means an initiation's mac1 and mask were made with keys
	// (a PSK, or none) that its authenticated initiator does not use with
	// us: for instance the public-key-only form, from a peer configured
	// with a PSK and without LegacyMAC.
	ErrWrongKeys = errors.New("crypto: initiation keyed for another peer's PSK")
)

// Session is the outcome of a completed handshake.
type Session struct {
	Peer        *Peer
	Keys        SessionKeys
	Initiator   bool
	LocalIndex  uint32    // our index for this session
	RemoteIndex uint32    // the peer's index for this session
	Remote      LaneOffer // the peer's lane offer (initiator's) or answer
}

// Lanes is the number of lanes the session runs when we offered local.
func (s *Session) Lanes(local LaneOffer) int { return min(local.Lanes(), s.Remote.Lanes()) }

func sessionFrom(cs1, cs2 *noise.CipherState, initiator bool) SessionKeys {
	return NewSessionKeys(cs1.UnsafeKey(), cs2.UnsafeKey(), initiator)
}

// Initiation is our pending handshake with a peer.
type Initiation struct {
	local *Local
	peer  *Peer
	index uint32
	offer LaneOffer
	mac1  [hsMacLen]byte
	// wk are the keys the initiation was sent with (its cookie reply
	// opens under them), rx ours the response must come under.
	wk, rx *wireKeys

	// cookieTaken is set by the first cookie reply that opens: later ones
	// for the same initiation are ignored.
	cookieTaken atomic.Bool

	mu sync.Mutex // guards hs and done (responses may arrive on any shard)
	hs *noise.HandshakeState
	// done: a response was read (successfully or not usable again).
	done bool
	// What rebuilds hs as it was after the initiation was written: the
	// config, our ephemeral private key and the payload.
	cfg     noise.Config
	ePriv   []byte
	payload []byte
}

// Initiate starts a handshake with peer: index is our session index (chosen
// by the router, unique among its pending and live sessions), offer our
// lanes. It returns the datagram to send to the peer's endpoint.
func (l *Local) Initiate(peer *Peer, index uint32, offer LaneOffer, now time.Time) (*Initiation, []byte, error) {
	if peer == nil {
		return nil, nil, errors.New("crypto: Initiate with no peer")
	}
	if err := offer.validate(); err != nil {
		return nil, nil, err
	}
	cfg := l.config(true)
	cfg.PeerStatic = peer.pub[:]
	cfg.PresharedKey = peer.psk[:]
	hs, err := noise.NewHandshakeState(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("crypto: handshake state: %w", err)
	}
	ts := NewTimestamp(now)
	payload := offer.appendTo(append([]byte(nil), ts[:]...))
	msg, _, _, err := hs.WriteMessage(nil, payload)
	if err != nil {
		return nil, nil, fmt.Errorf("crypto: write initiation: %w", err)
	}
	var ck *[16]byte
	peer.mu.Lock()
	if !peer.cookieAt.IsZero() && now.Sub(peer.cookieAt) < CookieValidity {
		c := [16]byte(peer.cookie)
		ck = &c
	}
	lens := peer.lens
	peer.mu.Unlock()
	dgram := sealHandshake(peer.wk, hsFields{typ: msgInit, sender: index,
		receiver: initLongCookies, noise: msg}, ck, lens, initMaxLen(lens))
	in := &Initiation{local: l, peer: peer, hs: hs, index: index, offer: offer,
		wk: peer.wk, rx: peer.rx,
		cfg: cfg, ePriv: hs.LocalEphemeral().Private, payload: payload}
	copy(in.mac1[:], mac1Of(dgram))
	return in, dgram, nil
}

// rebuild replaces in.hs by a state equal to the one right after the
// initiation was written (same ephemeral, same payload, so the same
// transcript). flynn/noise's ReadMessage has no way to undo a failed read
// (after a DH error it leaves the forged ephemeral hashed in), and a
// HandshakeState cannot be copied, so a failed read is undone by redoing the
// write: two scalar multiplications, paid only by responses that fail.
// Caller holds in.mu.
func (in *Initiation) rebuild() error {
	cfg := in.cfg
	cfg.Random = bytes.NewReader(in.ePriv)
	hs, err := noise.NewHandshakeState(cfg)
	if err != nil {
		return err
	}
	if _, _, _, err := hs.WriteMessage(nil, in.payload); err != nil {
		return err
	}
	in.hs = hs
	return nil
}

// Peer is the peer this initiation is for.
func (in *Initiation) Peer() *Peer { return in.peer }

// ConsumeCookieReply accepts a cookie reply to this initiation and stores
// the cookie in the peer for the next initiation (the router retries).
func (in *Initiation) ConsumeCookieReply(reply []byte, now time.Time) error {
	if in.cookieTaken.Load() {
		return ErrCookieReply
	}
	ck, err := openCookieReply(&in.wk.cookie, reply, in.mac1[:])
	if err != nil {
		return err
	}
	if in.cookieTaken.Swap(true) {
		return ErrCookieReply
	}
	in.peer.mu.Lock()
	in.peer.cookie, in.peer.cookieAt = ck, now
	in.peer.mu.Unlock()
	return nil
}

// ConsumeResponse completes the handshake with the peer's response.
func (in *Initiation) ConsumeResponse(dgram []byte) (*Session, error) {
	if !checkMac1(in.rx, dgram) {
		return nil, ErrMac1
	}
	f, err := openHandshake(in.rx, dgram)
	if err != nil {
		return nil, err
	}
	if f.typ != msgResponse || f.receiver != in.index {
		return nil, ErrNotForThisInitiation
	}
	// Anyone holding our keys for this peer (our public key, and the PSK
	// when there is one) can send a response with a valid mac1:
	// nothing unauthenticated may change the pending state. A low-order
	// ephemeral is refused before the Noise state absorbs it, and any other
	// failed read is undone by rebuilding the state.
	if isLowOrder(f.noise[:KeyLen]) {
		return nil, ErrLowOrder
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.done {
		return nil, ErrNotForThisInitiation
	}
	payload, cs1, cs2, err := in.hs.ReadMessage(nil, f.noise)
	if err != nil || cs1 == nil || cs2 == nil {
		if rerr := in.rebuild(); rerr != nil {
			in.done = true
		}
		if err == nil {
			err = ErrHandshake
		}
		return nil, fmt.Errorf("crypto: read response: %w", err)
	}
	// The response authenticated: this initiation is used up.
	in.done = true
	answer, err := parseLaneOffer(payload)
	if err != nil {
		return nil, err
	}
	return &Session{Peer: in.peer, Keys: sessionFrom(cs1, cs2, true), Initiator: true,
		LocalIndex: in.index, RemoteIndex: f.sender, Remote: answer}, nil
}
