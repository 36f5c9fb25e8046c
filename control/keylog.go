package control

import (
	"encoding/hex"
	"fmt"

	"github.com/yip-router/yip-router/crypto"
)

// The key log (Deps.KeyLog; the router opens it from YIP_KEYLOG): one line
// per lane of every installed session with that lane's framing keys, the
// SipHash tag and header-protection keys of both directions, so that a
// capture of the underlay can be labelled datagram by datagram (kind, FEC
// fields, padding) by anyone holding the log — tests measure what a
// length or timing classifier sees that way. The AEAD keys are never
// written: the log labels a capture but cannot decrypt it. It is still a
// weapon: with a lane's tag and header keys anyone can forge datagrams
// that pass the tag (parity carries no AEAD of its own), disturbing that
// lane's FEC window until the next rekey. Lab and test machines only.
//
//	yip-keylog 1 <peer public key> <lane> <send tag> <send hp> <recv tag> <recv hp>
//
// (keys in hex; "send" is this router's direction).
const keyLogVersion = 1

// logLaneKeys writes lane i's framing keys to the key log, if any. Caller
// holds c.mu (lines of one session stay together).
func (c *Core) logLaneKeys(p *peer, i int, send, recv *crypto.LaneKeys) {
	if c.keyLog == nil {
		return
	}
	if _, err := fmt.Fprintf(c.keyLog, "yip-keylog %d %s %d %s %s %s %s\n", keyLogVersion, p.cfg.PublicKey, i,
		hex.EncodeToString(send.Tag[:]), hex.EncodeToString(send.HP[:]),
		hex.EncodeToString(recv.Tag[:]), hex.EncodeToString(recv.HP[:])); err != nil {
		c.log.Warn("key log: write failed; logging no more keys")
		c.keyLog = nil
	}
}
