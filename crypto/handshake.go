package crypto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
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

// MaxHandshakeKeys bounds the handshake keys a responder accepts (the
// distinct PSKs of its peers without LegacyMAC, plus the public-key-only
// form when a peer has no PSK or has LegacyMAC): every datagram of
// handshake length that matches no lane has its mac1 checked under each,
// one keyed BLAKE2s per key. The config check enforces it.
const MaxHandshakeKeys = 8

// Local is this router's handshake identity: its static key, the keys bound
// to its public key (to recognise handshakes addressed to it), the ss cache
// and the configured peers. Safe for concurrent use by all shards.
type Local struct {
	priv  PrivateKey
	pub   PublicKey
	wk    wireKeys // the public-key-only form (no PSK)
	dh    *cachedDH
	suite noise.CipherSuite

	mu    sync.RWMutex // guards peers and rx (config changes only)
	peers map[PublicKey]*Peer
	// rx are our receive keys by PSK (zero: the public-key-only form),
	// each with the number of peers that may use it.
	rx map[PresharedKey]*rxKey
	// keySet is rx's keys as a slice, replaced (never modified) when a key
	// comes or goes: what a datagram's mac1 is checked against, without a
	// lock.
	keySet atomic.Pointer[[]*wireKeys]
}

type rxKey struct {
	wk   *wireKeys
	refs int
}

// Peer is a configured remote static key with what the handshake keeps per
// peer: the PSK, the newest accepted timestamp, and a cookie it gave us.
type Peer struct {
	pub PublicKey
	psk PresharedKey
	// legacy: the peer has a PSK but handshakes with it, both ways, use
	// the public-key-only form (as routers that predate PSK-keyed
	// handshakes do).
	legacy bool
	// wk are the keys bound to the peer's public key, which we send to it
	// with: PSK-keyed when it has a PSK and is not legacy.
	wk *wireKeys
	// rx are our keys in the same form: its handshakes to us (responses
	// and initiations) come under them.
	rx *wireKeys

	mu       sync.Mutex
	lastTS   Timestamp
	cookie   Cookie
	cookieAt time.Time
	lens     WireLengths // what our handshake messages to it draw lengths from
}

// PublicKey returns the peer's static public key.
func (p *Peer) PublicKey() PublicKey { return p.pub }

// SetWireLengths sets the distribution the lengths of our initiations and
// responses to p are drawn from (nil: the built-in one, TunnelLengths).
func (p *Peer) SetWireLengths(d WireLengths) {
	p.mu.Lock()
	p.lens = d
	p.mu.Unlock()
}

func (p *Peer) wireLengths() WireLengths {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lens
}

// NewLocal prepares the identity for priv. cacheSS selects the ss cache
// (always on in the router; off only to measure what it saves).
func NewLocal(priv PrivateKey, cacheSS bool) *Local {
	l := &Local{priv: priv, pub: priv.Public(), peers: map[PublicKey]*Peer{}, rx: map[PresharedKey]*rxKey{}}
	l.wk = newWireKeys(l.pub)
	l.dh = newCachedDH(priv, cacheSS)
	l.suite = noise.NewCipherSuite(l.dh, noise.CipherChaChaPoly, noise.HashBLAKE2s)
	return l
}

// PublicKey returns our static public key.
func (l *Local) PublicKey() PublicKey { return l.pub }

// AddPeer configures a peer (replacing one with the same key) and computes
// its ss for the cache now, off the handshake path. With a PSK, handshakes
// with it are keyed by the PSK (AddPeerLegacy for a peer that predates
// that).
func (l *Local) AddPeer(pub PublicKey, psk PresharedKey) (*Peer, error) {
	return l.AddPeerLegacy(pub, psk, false)
}

// AddPeerLegacy is AddPeer with the choice of the legacy form: legacy (with
// a PSK) keys the handshakes with the peer, both ways, by the public keys
// only, as routers before PSK-keyed handshakes do; the PSK still goes into
// Noise. Without a PSK legacy changes nothing.
func (l *Local) AddPeerLegacy(pub PublicKey, psk PresharedKey, legacy bool) (*Peer, error) {
	if pub == l.pub {
		return nil, fmt.Errorf("crypto: peer key %s is our own public key", pub)
	}
	if err := l.dh.add(pub); err != nil {
		return nil, fmt.Errorf("crypto: peer key %s is not usable: %v", pub, err)
	}
	legacy = legacy && !psk.IsZero()
	p := &Peer{pub: pub, psk: psk, legacy: legacy}
	wk := newWireKeysPSK(pub, p.form())
	p.wk = &wk
	l.mu.Lock()
	p.rx = l.refKeys(p) // before the old peer's unref: a shared key stays
	if old, ok := l.peers[pub]; ok {
		old.mu.Lock()
		p.lastTS = old.lastTS // keep replay protection across reloads
		old.mu.Unlock()
		l.unrefKeys(old)
	}
	l.peers[pub] = p
	l.mu.Unlock()
	return p, nil
}

// form is the PSK that keys p's handshakes' mask and mac1: its PSK, or
// zero (the public-key-only form) when it has none or is legacy.
func (p *Peer) form() PresharedKey {
	if p.legacy {
		return PresharedKey{}
	}
	return p.psk
}

// accepts reports whether p may send us handshakes keyed by wk.
func (p *Peer) accepts(wk *wireKeys) bool { return wk.psk == p.form() }

// refKeys counts p's form in l.rx, adding its key if new, and returns our
// keys in that form. Caller holds l.mu.
func (l *Local) refKeys(p *Peer) *wireKeys {
	f := p.form()
	r := l.rx[f]
	if r == nil {
		wk := l.wk
		if !f.IsZero() {
			wk = newWireKeysPSK(l.pub, f)
		}
		r = &rxKey{wk: &wk}
		l.rx[f] = r
		l.publishKeys()
	}
	r.refs++
	return r.wk
}

// unrefKeys undoes refKeys for a peer being replaced or removed. Caller
// holds l.mu.
func (l *Local) unrefKeys(p *Peer) {
	f := p.form()
	if r := l.rx[f]; r != nil {
		if r.refs--; r.refs <= 0 {
			delete(l.rx, f)
			l.publishKeys()
		}
	}
}

// publishKeys replaces keySet with rx's keys. Caller holds l.mu.
func (l *Local) publishKeys() {
	set := make([]*wireKeys, 0, len(l.rx))
	for _, r := range l.rx {
		set = append(set, r.wk)
	}
	l.keySet.Store(&set)
}

// HandshakeKeys is the number of keys a datagram of handshake length is
// checked under (one BLAKE2s each) when it matches none.
func (l *Local) HandshakeKeys() int {
	if s := l.keySet.Load(); s != nil {
		return len(*s)
	}
	return 0
}

// match returns the key of ours under which dgram has a valid mac1, or nil:
// the cheap gate every datagram of handshake length that matches no lane
// goes through. No allocation.
func (l *Local) match(dgram []byte) *wireKeys {
	if len(dgram) < hsMinLen || len(dgram) > hsMaxLen {
		return nil
	}
	s := l.keySet.Load()
	if s == nil {
		return nil
	}
	for _, wk := range *s {
		if checkMac1(wk, dgram) {
			return wk
		}
	}
	return nil
}

// Prepare computes the static–static DH of many peers at once, on every
// CPU, so AddPeer finds them cached: a hub starting with 10,000 peers
// spends most of its start in these scalar multiplications. Keys AddPeer
// would refuse are skipped here and refused there.
func (l *Local) Prepare(pubs []PublicKey) {
	if !l.dh.enabled || len(pubs) < 64 {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(pubs)); i = next.Add(1) - 1 {
				if pubs[i] != l.pub {
					_ = l.dh.add(pubs[i])
				}
			}
		})
	}
	wg.Wait()
}

// CheckPeerKey reports whether AddPeer would accept pub, without a DH: so
// a configuration can be checked whole before any of it is applied.
func (l *Local) CheckPeerKey(pub PublicKey) error {
	if pub == l.pub {
		return fmt.Errorf("crypto: peer key %s is our own public key", pub)
	}
	if isLowOrder(pub[:]) {
		return fmt.Errorf("crypto: peer key %s is not usable: low order", pub)
	}
	return nil
}

// RemovePeer forgets a peer and its cached ss.
func (l *Local) RemovePeer(pub PublicKey) {
	l.mu.Lock()
	if p, ok := l.peers[pub]; ok {
		l.unrefKeys(p)
		delete(l.peers, pub)
	}
	l.mu.Unlock()
	l.dh.remove(pub)
}

// Peer returns the configured peer with key pub, or nil.
func (l *Local) Peer(pub PublicKey) *Peer {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.peers[pub]
}

// scalarMults is the number of X25519 scalar multiplications done so far
// outside key generation (tests check the ss cache with it).
func (l *Local) scalarMults() uint64 { return l.dh.scalar.Load() }

func (l *Local) config(initiator bool) noise.Config {
	return noise.Config{
		CipherSuite:           l.suite,
		Pattern:               noise.HandshakeIK,
		Initiator:             initiator,
		Prologue:              []byte(noisePrologue),
		PresharedKeyPlacement: 2,
		StaticKeypair:         noise.DHKey{Private: l.priv[:], Public: l.pub[:]},
	}
}

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
