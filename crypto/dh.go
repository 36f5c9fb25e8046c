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
