package crypto

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/chacha20poly1305"
)

const (
	// RejectAfterMessages is the counter at which a lane stops sealing and
	// opening: the session must have been rekeyed long before (design: rekey
	// every 120 s or 2^60 messages).
	RejectAfterMessages = 1 << 60
	// AEADOverhead is the Poly1305 tag length.
	AEADOverhead = chacha20poly1305.Overhead
)

var (
	// ErrCounterExhausted means the lane sealed 2^60 packets: rekey.
	ErrCounterExhausted = errors.New("crypto: lane counter exhausted, rekey required")
	// ErrReplay means the counter was seen before or is too old.
	ErrReplay = errors.New("crypto: replayed or too old counter")
	// ErrOpen means the AEAD tag did not verify.
	ErrOpen = errors.New("crypto: message authentication failed")
)

// Sealer is the sending half of a lane: a key and a counter. It is used
// directly rather than through flynn/noise's CipherState, which allocates a
// nonce per call; the nonce lives in the struct so a call allocates nothing.
// Not safe for concurrent use: one lane, one shard.
type Sealer struct {
	aead  cipher.AEAD
	next  uint64
	nonce [chacha20poly1305.NonceSize]byte
}

// NewSealer makes a sealer for key, starting at counter 0.
func NewSealer(key *[32]byte) *Sealer {
	a, err := chacha20poly1305.New(key[:])
	if err != nil {
		panic("crypto: chacha20poly1305.New: " + err.Error()) // key length is fixed
	}
	return &Sealer{aead: a}
}

// Seal appends the ciphertext of plaintext (with ad authenticated) to dst and
// returns it with the counter it used. dst and plaintext may overlap exactly
// (in-place) as in cipher.AEAD.
func (s *Sealer) Seal(dst, ad, plaintext []byte) ([]byte, uint64, error) {
	c := s.next
	if c >= RejectAfterMessages {
		return dst, 0, ErrCounterExhausted
	}
	s.next++
	binary.LittleEndian.PutUint64(s.nonce[4:], c)
	return s.aead.Seal(dst, s.nonce[:], plaintext, ad), c, nil
}

// Opener is the receiving half of a lane: key plus replay window.
type Opener struct {
	aead   cipher.AEAD
	replay Replay
	nonce  [chacha20poly1305.NonceSize]byte
}

// NewOpener makes an opener for key with an empty replay window.
func NewOpener(key *[32]byte) *Opener {
	a, err := chacha20poly1305.New(key[:])
	if err != nil {
		panic("crypto: chacha20poly1305.New: " + err.Error())
	}
	return &Opener{aead: a}
}

// Open authenticates and decrypts ciphertext sealed under counter, appending
// the plaintext to dst. The counter is committed to the replay window only
// if the open succeeds, so forgeries cannot advance or poison the window.
func (o *Opener) Open(dst []byte, counter uint64, ad, ciphertext []byte) ([]byte, error) {
	if !o.replay.Check(counter) {
		return dst, ErrReplay
	}
	binary.LittleEndian.PutUint64(o.nonce[4:], counter)
	out, err := o.aead.Open(dst, o.nonce[:], ciphertext, ad)
	if err != nil {
		return dst, ErrOpen
	}
	o.replay.Commit(counter)
	return out, nil
}
