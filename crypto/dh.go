package crypto

import (
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
// once at configuration time (Trevor Perrin's suggestion, seed 002) takes one
// of the two scalar multiplications off every initiation it answers. The
// initiator's ss for the same pair is the same value and hits the cache too.
//
// Shards run handshakes concurrently, so the table is an immutable map behind
// an atomic pointer: readers never lock, writers (config changes) copy it.
type cachedDH struct {
	priv    PrivateKey
	enabled bool
	mu      sync.Mutex // serialises writers
	table   atomic.Pointer[map[PublicKey][32]byte]
	scalar  atomic.Uint64 // real X25519 calls; tests and benchmarks read it
}

func newCachedDH(priv PrivateKey, enabled bool) *cachedDH {
	d := &cachedDH{priv: priv, enabled: enabled}
	m := map[PublicKey][32]byte{}
	d.table.Store(&m)
	return d
}

func (d *cachedDH) x25519(priv, pub []byte) ([]byte, error) {
	d.scalar.Add(1)
	return curve25519.X25519(priv, pub)
}

// add computes and caches ss with pub. It returns the error X25519 gives for
// a low-order peer key, which is a configuration error worth reporting.
func (d *cachedDH) add(pub PublicKey) error {
	ss, err := d.x25519(d.priv[:], pub[:])
	if err != nil {
		return err
	}
	if !d.enabled {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.table.Load()
	m := make(map[PublicKey][32]byte, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	var v [32]byte
	copy(v[:], ss)
	m[pub] = v
	d.table.Store(&m)
	return nil
}

func (d *cachedDH) remove(pub PublicKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.table.Load()
	if _, ok := old[pub]; !ok {
		return
	}
	m := make(map[PublicKey][32]byte, len(old))
	for k, v := range old {
		if k != pub {
			m[k] = v
		}
	}
	d.table.Store(&m)
}

func (d *cachedDH) GenerateKeypair(rng io.Reader) (noise.DHKey, error) {
	return noise.DH25519.GenerateKeypair(rng)
}

func (d *cachedDH) DH(priv, pub []byte) ([]byte, error) {
	if d.enabled && len(pub) == KeyLen && subtle.ConstantTimeCompare(priv, d.priv[:]) == 1 {
		if v, ok := (*d.table.Load())[PublicKey(pub)]; ok {
			return v[:], nil
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
