package crypto

import (
	"strings"
	"testing"
)

func TestParseKeyErrors(t *testing.T) {
	cases := map[string]string{
		"":    "empty",
		"abc": "base64 characters",
		"!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!=": "not valid base64",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=": "all zeros",
		// 44 characters without padding decode to 33 bytes (this once
		// panicked: found by the config parser's fuzz target).
		"00000000000000000000000000000000000000000000": "decodes to 33 bytes",
	}
	for in, want := range cases {
		if _, err := ParsePrivateKey(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePrivateKey(%q) = %v, want error containing %q", in, err, want)
		}
		if _, err := ParsePublicKey(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePublicKey(%q) = %v, want error containing %q", in, err, want)
		}
	}
	// A zero PSK is legal (it means "none").
	if _, err := ParsePresharedKey("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="); err != nil {
		t.Errorf("zero PSK refused: %v", err)
	}
}

func TestKeyRoundTripAndClamp(t *testing.T) {
	for range 50 {
		k, err := GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		if k[0]&7 != 0 || k[31]&128 != 0 || k[31]&64 == 0 {
			t.Fatalf("key not clamped: %x", k)
		}
		k2, err := ParsePrivateKey(k.String())
		if err != nil || k2 != k {
			t.Fatalf("round trip: %v %x != %x", err, k2, k)
		}
		p, err := ParsePublicKey(k.Public().String())
		if err != nil || p != k.Public() {
			t.Fatalf("public round trip: %v", err)
		}
	}
	// Parsing clamps an unclamped scalar.
	var raw PrivateKey
	for i := range raw {
		raw[i] = 0xff
	}
	k, err := ParsePrivateKey(raw.String())
	if err != nil {
		t.Fatal(err)
	}
	if k[0] != 0xf8 || k[31] != 0x7f {
		t.Fatalf("ParsePrivateKey did not clamp: %x", k)
	}
}
