package crypto

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/dchest/siphash"
	"golang.org/x/crypto/chacha20poly1305"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 8439 §2.8.2: the AEAD primitive the lanes are built on.
func TestChaCha20Poly1305RFC8439(t *testing.T) {
	key := unhex(t, "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce := unhex(t, "070000004041424344454647")
	ad := unhex(t, "50515253c0c1c2c3c4c5c6c7")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want := unhex(t, "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"+
		"1ae10b594f09e26a7e902ecbd0600691")
	a, err := chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
		t.Fatalf("seal mismatch:\n got %x\nwant %x", got, want)
	}
}

// The lane nonce is WireGuard's: 32 zero bits then the 64-bit counter, little
// endian. Checked against the primitive with an explicit nonce.
func TestSealerNonceLayout(t *testing.T) {
	var key [32]byte
	key[0] = 9
	s := NewSealer(&key)
	a, _ := chacha20poly1305.New(key[:])
	for c := range uint64(3) {
		got, used, err := s.Seal(nil, []byte("ad"), []byte("hello"))
		if err != nil || used != c {
			t.Fatalf("Seal: counter %d err %v", used, err)
		}
		var nonce [12]byte
		binary.LittleEndian.PutUint64(nonce[4:], c)
		if want := a.Seal(nil, nonce[:], []byte("hello"), []byte("ad")); !bytes.Equal(got, want) {
			t.Fatalf("counter %d: nonce layout differs", c)
		}
	}
	s.next = RejectAfterMessages
	if _, _, err := s.Seal(nil, nil, []byte("x")); err != ErrCounterExhausted {
		t.Fatalf("exhausted counter: err %v", err)
	}
}

func TestOpenReplayAndTamper(t *testing.T) {
	var key [32]byte
	key[1] = 7
	s, o := NewSealer(&key), NewOpener(&key)
	var cts [][]byte
	for i := range 4 {
		ct, _, _ := s.Seal(nil, nil, []byte{byte(i), 1, 2, 3})
		cts = append(cts, ct)
	}
	// Reordered delivery is fine.
	for _, i := range []int{2, 0, 3, 1} {
		pt, err := o.Open(nil, uint64(i), nil, cts[i])
		if err != nil || pt[0] != byte(i) {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	// Duplicates are not.
	if _, err := o.Open(nil, 2, nil, cts[2]); err != ErrReplay {
		t.Fatalf("duplicate: err %v", err)
	}
	// A forged packet fails and does not burn its counter.
	ct, c, _ := s.Seal(nil, nil, []byte("real"))
	bad := append([]byte(nil), ct...)
	bad[0] ^= 1
	if _, err := o.Open(nil, c, nil, bad); err != ErrOpen {
		t.Fatalf("tampered: err %v", err)
	}
	if _, err := o.Open(nil, c, nil, ct); err != nil {
		t.Fatalf("genuine packet after a forgery with its counter: %v", err)
	}
}

// SipHash-2-4 reference vectors (Aumasson & Bernstein, key 00..0f, message
// 00..n-1): the tag primitive, and its 128-bit mode used for the mask.
func TestSipHashVectors(t *testing.T) {
	key := unhex(t, "000102030405060708090a0b0c0d0e0f")
	k0, k1 := binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])
	msg := make([]byte, 16)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, v := range []struct {
		n    int
		want string
	}{{0, "310e0edd47db6f72"}, {1, "fd67dc93c539f874"}, {15, "e545be4961ca29a1"}} { // the paper prints the last as the integer 0xa129ca6149be45e5
		var got [8]byte
		binary.LittleEndian.PutUint64(got[:], siphash.Hash(k0, k1, msg[:v.n]))
		if hex.EncodeToString(got[:]) != v.want {
			t.Errorf("SipHash-2-4(%d bytes) = %x, want %s", v.n, got, v.want)
		}
	}
	lo, hi := siphash.Hash128(k0, k1, nil)
	var got [16]byte
	binary.LittleEndian.PutUint64(got[:8], lo)
	binary.LittleEndian.PutUint64(got[8:], hi)
	if hex.EncodeToString(got[:]) != "a3817f04ba25a8e66df67214c7550293" {
		t.Errorf("SipHash-2-4-128(empty) = %x", got)
	}
}
