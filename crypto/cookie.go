package crypto

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dchest/siphash"
	"golang.org/x/crypto/chacha20poly1305"
)

// Cookies make a responder under load stateless and DH-free until the
// initiator proves it can receive at its source address (the TCP
// syncookie idea, with SipHash as the keyed function).
//
// cookie = SipHash-2-4-128(secret, source address ‖ port ‖ time slot).
// The secret is replaced every slot and the previous one is kept, so a cookie
// is valid for one to two slots and no state per source is ever stored.
const (
	// CookieSlot is how long a cookie secret is current.
	CookieSlot = 120 * time.Second
	// CookieLen is the cookie length.
	CookieLen = 16

	cookieNonceLen = chacha20poly1305.NonceSizeX
	cookieMinLen   = cookieNonceLen + CookieLen + chacha20poly1305.Overhead
	// cookieOldMax is the longest cookie reply routers that padded it by
	// a uniform 0..32 bytes accept: replies to initiations without
	// initLongCookies stay within it. Others go up to hsMaxLen.
	cookieOldMax = cookieMinLen + 32
)

// ErrCookieReply means a datagram is not a cookie reply to our initiation.
var ErrCookieReply = errors.New("crypto: not a cookie reply for this initiation")

// Cookie is a token the responder hands to an initiator's address.
type Cookie [CookieLen]byte

type cookieEpoch struct {
	slot      int64
	cur, prev [2]uint64
}

// CookieChecker makes and checks cookies. Safe for concurrent use by all
// shards: the secrets live in an immutable epoch swapped atomically.
type CookieChecker struct {
	epoch atomic.Pointer[cookieEpoch]
	// issued is the addresses given a cookie (issued.go): a mac2 from
	// any other address is refused without computing it.
	issued issuedFilter
}

// NewCookieChecker returns a checker with fresh random secrets.
func NewCookieChecker() *CookieChecker { return &CookieChecker{} }

func randomSecret() [2]uint64 {
	var b [16]byte
	mustRand(b[:])
	return [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

func (c *CookieChecker) epochAt(now time.Time) *cookieEpoch {
	slot := now.UnixNano() / int64(CookieSlot)
	for {
		e := c.epoch.Load()
		if e != nil && e.slot >= slot {
			return e
		}
		n := &cookieEpoch{slot: slot, cur: randomSecret()}
		if e != nil && e.slot == slot-1 {
			n.prev = e.cur
		} else {
			n.prev = randomSecret() // nothing valid to keep
		}
		if c.epoch.CompareAndSwap(e, n) {
			return n
		}
	}
}

func cookieFor(secret [2]uint64, slot int64, src netip.AddrPort) Cookie {
	var in [16 + 2 + 8]byte
	a := src.Addr().As16()
	copy(in[:16], a[:])
	binary.BigEndian.PutUint16(in[16:18], src.Port())
	binary.BigEndian.PutUint64(in[18:], uint64(slot))
	lo, hi := siphash.Hash128(secret[0], secret[1], in[:])
	var ck Cookie
	binary.LittleEndian.PutUint64(ck[:8], lo)
	binary.LittleEndian.PutUint64(ck[8:], hi)
	return ck
}

// Cookie returns the current cookie for src, which is thereby given one
// (issued.go).
func (c *CookieChecker) Cookie(src netip.AddrPort, now time.Time) Cookie {
	e := c.epochAt(now)
	c.issued.add(src, e.slot)
	return cookieFor(e.cur, e.slot, src)
}

// CheckMac2 reports whether dgram (a handshake whose mac1 is valid) carries
// a mac2 made with a current or previous cookie for src.
func (c *CookieChecker) CheckMac2(dgram []byte, src netip.AddrPort, now time.Time) bool {
	if Mac1Covered(len(dgram)) == 0 {
		return false
	}
	e := c.epochAt(now)
	if c.issued.mayHave(src, e.slot) {
		ck := cookieFor(e.cur, e.slot, src)
		if checkMac2((*[16]byte)(&ck), dgram) {
			return true
		}
	}
	if c.issued.mayHave(src, e.slot-1) {
		ck := cookieFor(e.prev, e.slot-1, src)
		return checkMac2((*[16]byte)(&ck), dgram)
	}
	return false
}

// sealCookieReply builds the reply carrying ck, encrypted under the
// responder-bound cookie key with the initiation's mac1 as associated data,
// so only the initiator that sent that initiation (and knows the responder's
// public key) can open it, and a reply cannot be replayed for another
// initiation. Its length is drawn from lens (nil: the built-in distribution)
// among cookieMinLen..maxLen, and never exceeds the initiation it answers.
// The padding is zeros: it is encrypted.
func sealCookieReply(a cipher.AEAD, ck Cookie, initiation []byte, lens WireLengths, maxLen int) ([]byte, error) {
	hi := min(len(initiation), maxLen, hsMaxLen)
	if hi < cookieMinLen {
		return nil, ErrHandshake
	}
	n := drawLen(lens, cookieMinLen, hi)
	out := make([]byte, n)
	mustRand(out[:cookieNonceLen])
	pt := out[cookieNonceLen : n-chacha20poly1305.Overhead]
	copy(pt, ck[:])
	return a.Seal(out[:cookieNonceLen], out[:cookieNonceLen], pt, mac1Of(initiation)), nil
}

// CookieReplyLen reports whether n is a possible cookie-reply length: the
// cheap first test for a datagram that matched nothing else.
func CookieReplyLen(n int) bool { return n >= cookieMinLen && n <= hsMaxLen }

func openCookieReply(key *[32]byte, reply, mac1 []byte) (Cookie, error) {
	var ck Cookie
	if !CookieReplyLen(len(reply)) {
		return ck, ErrCookieReply
	}
	a, err := chacha20poly1305.NewX(key[:])
	if err != nil {
		return ck, err
	}
	pt, err := a.Open(nil, reply[:cookieNonceLen], reply[cookieNonceLen:], mac1)
	if err != nil {
		return ck, ErrCookieReply
	}
	copy(ck[:], pt[:CookieLen])
	return ck, nil
}
