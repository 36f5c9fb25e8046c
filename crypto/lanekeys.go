package crypto

// LaneKeys are the keys of one direction of one lane. Every lane of a session
// has its own keys so that shards share no per-packet state, and so a packet
// replayed onto another lane fails its tag.
type LaneKeys struct {
	AEAD [32]byte // ChaCha20-Poly1305 key
	Tag  [16]byte // SipHash-2-4 key of the datagram tag
	HP   [16]byte // SipHash key of the header-protection mask
}

// SessionKeys are the two secret keys of Noise's Split(), seen from one side.
// They are derived from the chaining key, which mixes every DH and the PSK,
// so an observer who recomputes the public transcript hash learns nothing
// (wire keys derived from that hash would be known to anyone holding both
// public keys and a capture of the handshake).
type SessionKeys struct {
	send, recv [32]byte
}

// NewSessionKeys builds session keys from the split outputs. initiator says
// which side we are: Noise's first split key encrypts initiator→responder.
func NewSessionKeys(k1, k2 [32]byte, initiator bool) SessionKeys {
	if initiator {
		return SessionKeys{send: k1, recv: k2}
	}
	return SessionKeys{send: k2, recv: k1}
}

// SendLane derives the keys for sending on lane i.
func (s *SessionKeys) SendLane(i int) LaneKeys { return deriveLane(s.send[:], i) }

// RecvLane derives the keys for receiving on lane i.
func (s *SessionKeys) RecvLane(i int) LaneKeys { return deriveLane(s.recv[:], i) }

func deriveLane(secret []byte, lane int) LaneKeys {
	var buf [64]byte
	hkdfExpand(buf[:], secret, labelLane, uint16(lane))
	var k LaneKeys
	copy(k.AEAD[:], buf[0:32])
	copy(k.Tag[:], buf[32:48])
	copy(k.HP[:], buf[48:64])
	clear(buf[:])
	return k
}
