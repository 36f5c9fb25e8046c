package crypto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// MaxLanes bounds the lanes of one session (and so the size of a lane offer).
const MaxLanes = 64

// payloadVersion 2 adds the lane the initiation was sent from; version 1
// (without it: lane 0) is still read.
const payloadVersion = 2

// TAI64NLen is the length of a TAI64N timestamp.
const TAI64NLen = 12

// Timestamp is a TAI64N label: big-endian, so bytewise order is time order.
type Timestamp [TAI64NLen]byte

// NewTimestamp returns the TAI64N label of t.
func NewTimestamp(t time.Time) Timestamp {
	var ts Timestamp
	binary.BigEndian.PutUint64(ts[0:8], uint64(t.Unix())+0x400000000000000a)
	binary.BigEndian.PutUint32(ts[8:12], uint32(t.Nanosecond()))
	return ts
}

// After reports whether ts is strictly later than o.
func (ts Timestamp) After(o Timestamp) bool {
	for i := range ts {
		if ts[i] != o[i] {
			return ts[i] > o[i]
		}
	}
	return false
}

// LaneOffer is what one side says about its lanes in the handshake: how many
// it can run and the UDP port each of its lane sockets uses, so that the
// other side can address lane i at its 4-tuple and steer that to the shard
// owning lane i. The session runs min(offer, answer) lanes.
type LaneOffer struct {
	Ports []uint16 // Ports[i] is this side's UDP port for lane i
	// From is the lane whose socket sent the initiation (an initiator
	// sends each from a random lane, so no one port starts sessions): the
	// responder addresses that lane at the
	// initiation's source as seen, whatever a NAT did to its port.
	From int
	// version is the encoding read (0: the current one). A responder
	// answers in its initiator's version, so an initiator that only reads
	// version 1 still completes the handshake.
	version byte
}

// Lanes is the number of lanes offered.
func (o LaneOffer) Lanes() int { return len(o.Ports) }

// ErrPayload means an authenticated handshake payload is malformed.
var ErrPayload = errors.New("crypto: malformed handshake payload")

func (o LaneOffer) validate() error {
	if len(o.Ports) == 0 || len(o.Ports) > MaxLanes {
		return fmt.Errorf("crypto: lane offer must have 1..%d lanes, has %d", MaxLanes, len(o.Ports))
	}
	if o.From < 0 || o.From >= len(o.Ports) {
		return fmt.Errorf("crypto: lane offer sent from lane %d of %d", o.From, len(o.Ports))
	}
	return nil
}

func (o LaneOffer) appendTo(b []byte) []byte {
	if o.version == 1 {
		b = append(b, 1, byte(len(o.Ports))) // no sending lane: lane 0
	} else {
		b = append(b, payloadVersion, byte(len(o.Ports)), byte(o.From))
	}
	for _, p := range o.Ports {
		b = binary.BigEndian.AppendUint16(b, p)
	}
	return b
}

func parseLaneOffer(b []byte) (LaneOffer, error) {
	if len(b) < 2 || (b[0] != payloadVersion && b[0] != 1) {
		return LaneOffer{}, ErrPayload
	}
	n, hdr := int(b[1]), 2
	if b[0] == payloadVersion {
		hdr = 3
	}
	if n == 0 || n > MaxLanes || len(b) != hdr+2*n {
		return LaneOffer{}, ErrPayload
	}
	o := LaneOffer{Ports: make([]uint16, n), version: b[0]}
	if hdr == 3 {
		o.From = int(b[2])
		if o.From >= n {
			return LaneOffer{}, ErrPayload
		}
	}
	for i := range o.Ports {
		o.Ports[i] = binary.BigEndian.Uint16(b[hdr+2*i:])
	}
	return o, nil
}
