package flood

import (
	"fmt"

	"golang.org/x/crypto/blake2s"
)

// WireGuard's handshake messages as wireguard-go reads them
// (device/noise-protocol.go), integers little endian:
//
//	initiation, type 1:   type (4) ‖ sender index (4) ‖ ephemeral (32) ‖
//	                      encrypted static (32+16) ‖ encrypted timestamp (12+16) ‖ mac1 (16) ‖ mac2 (16)
//	response, type 2:     type ‖ sender index ‖ receiver index ‖ ephemeral (32) ‖
//	                      encrypted nothing (16) ‖ mac1 ‖ mac2
//	cookie reply, type 3: type ‖ receiver index ‖ nonce (24) ‖ encrypted cookie (16+16)
//
// The attack's initiations (WGInitiations) and bench-scale's simulated
// WireGuard peers share these, so both speak the protocol one way.
const (
	WGInitiationType  = 1
	WGResponseType    = 2
	WGCookieReplyType = 3
	WGInitiationLen   = 148
	WGResponseLen     = 92
	WGCookieReplyLen  = 64
	wgMAC1Off         = WGInitiationLen - 32 // mac1 covers the bytes before it
	wgLabelMAC1       = "mac1----"
	wgLabelCookie     = "cookie--"
)

// WGMAC1Key is the key of a WireGuard mac1 for a receiver with static
// public key pub: BLAKE2s-256("mac1----" ‖ pub).
func WGMAC1Key(pub [32]byte) [32]byte {
	return blake2s.Sum256(append([]byte(wgLabelMAC1), pub[:]...))
}

// WGMAC1 is the mac1 of msg (a whole initiation or response, mac1 and
// mac2 included) under key: BLAKE2s-128 keyed by key over the bytes
// before mac1.
func WGMAC1(key [32]byte, msg []byte) [16]byte {
	return mac128(key[:], msg[:len(msg)-32])
}

// WGCookieKey is the XChaCha20-Poly1305 key of the cookie replies of a
// responder with static public key pub: BLAKE2s-256("cookie--" ‖ pub).
func WGCookieKey(pub [32]byte) [32]byte {
	return blake2s.Sum256(append([]byte(wgLabelCookie), pub[:]...))
}

// WGMAC2 is the mac2 of msg (a whole initiation or response) under the
// cookie a cookie reply carried: BLAKE2s-128 keyed by the cookie over the
// bytes before mac2, mac1 included.
func WGMAC2(cookie [16]byte, msg []byte) [16]byte {
	return mac128(cookie[:], msg[:len(msg)-16])
}

func mac128(key, b []byte) [16]byte {
	h, err := blake2s.New128(key)
	if err != nil {
		panic(fmt.Sprintf("flood: blake2s: %v", err)) // 16- and 32-byte keys are valid
	}
	h.Write(b)
	var mac [16]byte
	h.Sum(mac[:0])
	return mac
}
