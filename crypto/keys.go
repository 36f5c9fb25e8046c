package crypto

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"golang.org/x/crypto/curve25519"
)

// KeyLen is the length of every key in its binary form.
const KeyLen = 32

// PrivateKey is a clamped Curve25519 scalar.
type PrivateKey [KeyLen]byte

// PublicKey is a Curve25519 point (u-coordinate).
type PublicKey [KeyLen]byte

// PresharedKey is the optional symmetric key mixed into the handshake
// (Noise psk2). The zero value means "no PSK", as in WireGuard.
type PresharedKey [KeyLen]byte

// GeneratePrivateKey returns a fresh clamped private key from crypto/rand.
func GeneratePrivateKey() (PrivateKey, error) {
	var k PrivateKey
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("generate private key: %w", err)
	}
	k.clamp()
	return k, nil
}

// GeneratePresharedKey returns 32 random bytes.
func GeneratePresharedKey() (PresharedKey, error) {
	var k PresharedKey
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("generate preshared key: %w", err)
	}
	return k, nil
}

// clamp applies RFC 7748 clamping so that keys written by other tools (or by
// hand) behave the same as ours; X25519 clamps internally anyway, but storing
// the clamped form keeps the text form identical to `wg genkey`.
func (k *PrivateKey) clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// Public derives the public key.
func (k PrivateKey) Public() PublicKey {
	var p PublicKey
	out, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		// Only possible for a low-order result, which the basepoint cannot give.
		panic("crypto: X25519 with basepoint failed: " + err.Error())
	}
	copy(p[:], out)
	return p
}

// IsZero reports whether the key is all zeros (i.e. unset).
func (k PrivateKey) IsZero() bool { return isZero(k[:]) }

// IsZero reports whether the key is all zeros (i.e. unset).
func (k PublicKey) IsZero() bool { return isZero(k[:]) }

// IsZero reports whether the key is all zeros (i.e. unset).
func (k PresharedKey) IsZero() bool { return isZero(k[:]) }

func isZero(b []byte) bool {
	var z [KeyLen]byte
	return subtle.ConstantTimeCompare(b, z[:]) == 1
}

// String returns the base64 text form used in config files.
func (k PrivateKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// String returns the base64 text form used in config files.
func (k PublicKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// String returns the base64 text form used in config files.
func (k PresharedKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// ParsePrivateKey parses the base64 form and clamps the scalar.
func ParsePrivateKey(s string) (PrivateKey, error) {
	var k PrivateKey
	if err := parseKey(s, k[:], "private key"); err != nil {
		return k, err
	}
	if k.IsZero() {
		return k, fmt.Errorf("private key is all zeros")
	}
	k.clamp()
	return k, nil
}

// ParsePublicKey parses the base64 form. The all-zero point is refused: it
// is what a config typo or an empty key decodes to, and no real key is zero.
func ParsePublicKey(s string) (PublicKey, error) {
	var k PublicKey
	if err := parseKey(s, k[:], "public key"); err != nil {
		return k, err
	}
	if k.IsZero() {
		return k, fmt.Errorf("public key is all zeros")
	}
	return k, nil
}

// ParsePresharedKey parses the base64 form.
func ParsePresharedKey(s string) (PresharedKey, error) {
	var k PresharedKey
	err := parseKey(s, k[:], "preshared key")
	return k, err
}

func parseKey(s string, dst []byte, what string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(s) != base64.StdEncoding.EncodedLen(KeyLen) {
		return fmt.Errorf("%s must be %d base64 characters (32 bytes), got %d characters",
			what, base64.StdEncoding.EncodedLen(KeyLen), len(s))
	}
	// Decode into room for 33 bytes: 44 characters without padding decode
	// to 33, and Decode would write past a 32-byte buffer.
	var buf [KeyLen + 3]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(s))
	if err != nil {
		return fmt.Errorf("%s is not valid base64: %v", what, err)
	}
	copy(dst, buf[:KeyLen])
	if n != KeyLen {
		return fmt.Errorf("%s decodes to %d bytes, want %d", what, n, KeyLen)
	}
	return nil
}
