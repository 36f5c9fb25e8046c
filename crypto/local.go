package crypto

// Local, this router's handshake identity, and the peers configured on it:
// adding and removing them, the handshake keys their PSKs bind (which a
// datagram's mac1 is checked against, without a lock), and the Noise
// configuration both sides start from.

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flynn/noise"
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
	if Mac1Covered(len(dgram)) == 0 {
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
