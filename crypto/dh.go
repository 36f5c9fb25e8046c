package crypto

import (
	"crypto/ecdh"
	"crypto/subtle"
	"io"
	"sync"
	"sync/atomic"

	"github.com/flynn/noise"
	"golang.org/x/crypto/curve25519"
)

// cachedDH is a noise.DHFunc that remembers the static–static DH between our
// private key and each configured peer. IK's first message costs the
// responder es + ss; ss never changes for a configured peer, so computing it
// once at configuration time takes one of the two scalar multiplications
// off every initiation it answers. The initiator's ss for the same pair is
// the same value and hits the cache too.
//
// Shards run handshakes concurrently and a hub configures thousands of
// peers at start, so the table is a sync.Map: reads of keys that no longer
// change take no lock, and adding a peer costs O(1) (a copy-on-write map
// would make adding N peers quadratic).
type cachedDH struct {
	priv PrivateKey
	// static is priv as a crypto/ecdh key, made once: x/crypto's X25519
	// builds an ecdh.PrivateKey per call, which derives the public key, a
	// second scalar multiplication as costly as the DH itself.
	static  *ecdh.PrivateKey
	enabled bool
	eph     ephemerals
	table   sync.Map      // PublicKey → *[32]byte
	scalar  atomic.Uint64 // real X25519 calls; tests and benchmarks read it
}

func newCachedDH(priv PrivateKey, enabled bool) *cachedDH {
	d := &cachedDH{priv: priv, enabled: enabled}
	// Clamping happens inside ECDH, so any 32 bytes make a key.
	d.static, _ = ecdh.X25519().NewPrivateKey(priv[:])
	return d
}

func (d *cachedDH) x25519(priv, pub []byte) ([]byte, error) {
	d.scalar.Add(1)
	if d.static != nil && subtle.ConstantTimeCompare(priv, d.priv[:]) == 1 {
		p, err := ecdh.X25519().NewPublicKey(pub)
		if err != nil {
			return nil, err
		}
		// Like X25519, ECDH refuses a low-order point (all-zero result).
		return d.static.ECDH(p)
	}
	if k := d.eph.find(priv); k != nil {
		p, err := ecdh.X25519().NewPublicKey(pub)
		if err != nil {
			return nil, err
		}
		return k.ECDH(p)
	}
	return curve25519.X25519(priv, pub)
}

// ephemerals remembers the ecdh keys of the last ephemeral keys generated,
// for the same reason as cachedDH.static: each handshake uses its ephemeral
// in two DHs (responder: ee and se; initiator: es, then ee when the
// response comes), and rebuilding the ecdh key for each costs a scalar
// multiplication. An entry is wiped after its second use, so an ephemeral
// private key does not outlive its handshake here; one that has rotated out
// (an initiator's response arriving after 64 other handshakes) takes the
// slow path.
type ephemerals struct {
	mu   sync.Mutex
	raw  [64][KeyLen]byte
	keys [64]*ecdh.PrivateKey
	uses [64]uint8
	next int
}

func (e *ephemerals) add(k *ecdh.PrivateKey) {
	e.mu.Lock()
	copy(e.raw[e.next][:], k.Bytes())
	e.keys[e.next], e.uses[e.next] = k, 0
	e.next = (e.next + 1) % len(e.keys)
	e.mu.Unlock()
}

func (e *ephemerals) find(priv []byte) *ecdh.PrivateKey {
	if len(priv) != KeyLen {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.keys {
		if e.keys[i] != nil && subtle.ConstantTimeCompare(e.raw[i][:], priv) == 1 {
			k := e.keys[i]
			if e.uses[i]++; e.uses[i] >= 2 {
				clear(e.raw[i][:])
				e.keys[i] = nil
			}
			return k
		}
	}
	return nil
}

// add computes and caches ss with pub. It returns the error X25519 gives for
// a low-order peer key, which is a configuration error worth reporting.
func (d *cachedDH) add(pub PublicKey) error {
	if _, ok := d.table.Load(pub); ok {
		return nil // ss depends on the two keys only
	}
	ss, err := d.x25519(d.priv[:], pub[:])
	if err != nil {
		return err
	}
	if !d.enabled {
		return nil
	}
	v := new([32]byte)
	copy(v[:], ss)
	d.table.Store(pub, v)
	return nil
}

func (d *cachedDH) remove(pub PublicKey) { d.table.Delete(pub) }

// GenerateKeypair reads the private key from rng exactly as
// noise.DH25519 does (32 bytes, nothing more: Initiation.rebuild replays
// them) and keeps its ecdh key for the DHs that follow.
func (d *cachedDH) GenerateKeypair(rng io.Reader) (noise.DHKey, error) {
	var priv [KeyLen]byte
	if _, err := io.ReadFull(rng, priv[:]); err != nil {
		return noise.DHKey{}, err
	}
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		return noise.DHKey{}, err
	}
	d.eph.add(k)
	return noise.DHKey{Private: priv[:], Public: k.PublicKey().Bytes()}, nil
}

func (d *cachedDH) DH(priv, pub []byte) ([]byte, error) {
	if d.enabled && len(pub) == KeyLen && subtle.ConstantTimeCompare(priv, d.priv[:]) == 1 {
		if v, ok := d.table.Load(PublicKey(pub)); ok {
			return v.(*[32]byte)[:], nil
		}
	}
	return d.x25519(priv, pub)
}

func (d *cachedDH) DHLen() int     { return 32 }
func (d *cachedDH) DHName() string { return "25519" }

// lowOrderPoints are the X25519 public keys (top bit clear, as a receiver
// reads them) whose shared secret with any private key is all zeros: the
// points of order 1, 2, 4 and 8 and their non-canonical encodings
// (libsodium's blocklist). X25519 refuses them, but flynn/noise calls the DH
// only after it has hashed the peer's ephemeral into the handshake state and
// does not roll that back, so they are refused before the state sees them.
var lowOrderPoints = [...][KeyLen]byte{
	{},  // 0
	{1}, // 1
	{0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a, 0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00},
	{0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b, 0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57},
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // p-1
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // p
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, // p+1
}

// isLowOrder reports whether the 32-byte X25519 public key pub is one of
// lowOrderPoints (pub's top bit is ignored, as X25519 ignores it). It costs
// a few comparisons, no scalar multiplication.
func isLowOrder(pub []byte) bool {
	if len(pub) != KeyLen {
		return false
	}
	var k [KeyLen]byte
	copy(k[:], pub)
	k[KeyLen-1] &= 0x7f
	for i := range lowOrderPoints {
		if k == lowOrderPoints[i] {
			return true
		}
	}
	return false
}
