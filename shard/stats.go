package shard

import "sync/atomic"

// Counter indexes a shard's counters. Drops are counted per reason, never
// logged per packet.
type Counter int

// The counters of a shard.
const (
	TunIn           Counter = iota // packets read from the TUN queue
	TunOut                         // packets written to the TUN queue
	UDPIn                          // datagrams received
	UDPOut                         // datagrams sent
	BytesIn                        // UDP payload bytes received
	BytesOut                       // UDP payload bytes sent
	HandedOff                      // TUN packets passed to the lane's owner shard
	TakenOver                      // packets received from other shards
	ForeignLane                    // datagrams received for a lane another shard owns
	ParityOut                      // parity symbols sent
	FECRecovered                   // data symbols recovered from parity
	DropNoRoute                    // inner destination matches no peer
	DropNoSession                  // peer has no lanes yet
	DropUnknownLane                // datagram from an address with no lane
	DropBadTag                     // tag did not verify (forged, corrupt or stale key)
	DropBadHeader                  // authenticated but invalid header
	DropReplay                     // replayed or too old counter
	DropDecrypt                    // AEAD open failed after a good tag
	DropNotAllowed                 // inner source not in the peer's AllowedIPs
	DropRingFull                   // hand-off ring to another shard full
	DropPoolEmpty                  // no free packet buffer
	DropSend                       // socket refused the datagram
	DropTunWrite                   // TUN refused the packet
	DropOversize                   // inner packet too large for a datagram, or a datagram longer than any router sends
	DropSeal                       // sealing failed (counter exhausted)
	DropDuplicate                  // FEC: symbol already seen (replays inside the window)
	DropFECWindow                  // FEC: symbol outside the window, invalid or inconsistent
	ControlIn                      // control frames received
	ControlOut                     // control frames sent
	PoolHighWater                  // gauge: most packet buffers ever in use at once
	RingHighWater                  // gauge: fullest any incoming mesh ring has been seen
	TunSuperIn                     // TUN superpackets read and split (TSO/USO)
	TunSuperOut                    // coalesced superpackets written to the TUN queue (GRO)
	DropTunBad                     // TUN read with an unusable virtio-net header
	UDPSuperIn                     // UDP GRO messages received (several datagrams each)
	RoamTrials                     // tag trials of datagrams that matched no lane at their address
	LaneMoved                      // lanes moved to a new remote by an authenticated datagram
	LaneAdopted                    // lanes moved here from another shard (their datagrams arrive here)
	SteerRefused                   // lanes the listen group's steering map had no room for
	FECEvicted                     // FEC: open groups evicted to keep a lane's decoder under its byte cap
	FECNotStored                   // FEC: symbols not kept for recovery because of the byte cap
	LaneMoveRefused                // authenticated datagrams from an address another peer's lane holds: the lane did not move
	StrangersIn                    // datagrams read from the strangers' socket (sources no lane is steered for)
	KnownIn                        // datagrams read from the known socket (no lane's, from an address a peer is known at)
	TSRaised                       // FEC-recovered TCP segments whose timestamp was raised to their flow's latest retransmission's (shard/tcpts)
	numCounters
)

var counterNames = [numCounters]string{
	"tun_in", "tun_out", "udp_in", "udp_out", "bytes_in", "bytes_out",
	"handed_off", "taken_over", "foreign_lane", "parity_out", "fec_recovered",
	"drop_no_route", "drop_no_session", "drop_unknown_lane", "drop_bad_tag",
	"drop_bad_header", "drop_replay", "drop_decrypt", "drop_not_allowed",
	"drop_ring_full", "drop_pool_empty", "drop_send", "drop_tun_write",
	"drop_oversize", "drop_seal", "drop_duplicate", "drop_fec_window",
	"control_in", "control_out", "pool_high_water", "ring_high_water",
	"tun_super_in", "tun_super_out", "drop_tun_bad", "udp_super_in",
	"roam_trials", "lane_moved", "lane_adopted", "steer_refused",
	"fec_evicted", "fec_not_stored", "lane_move_refused", "strangers_in", "known_in",
	"fec_tcp_ts_raised",
}

// IsGauge reports whether c is a level (a high-water mark) rather than a
// count that only grows.
func (c Counter) IsGauge() bool { return c == PoolHighWater || c == RingHighWater }

func (c Counter) String() string { return counterNames[c] }

// Counters returns every counter in order, for status and metrics.
func Counters() []Counter {
	cs := make([]Counter, numCounters)
	for i := range cs {
		cs[i] = Counter(i)
	}
	return cs
}

// stats are plain counters written by the shard's own goroutine on the hot
// path (no atomics per packet) and published to atomic mirrors with the
// loop's timers (at most every 50 ms), which is what other goroutines read.
type stats struct {
	c   [numCounters]uint64
	pub [numCounters]atomic.Uint64
}

func (s *stats) publish() {
	for i := range s.c {
		s.pub[i].Store(s.c[i])
	}
}

// Snapshot is a copy of a shard's published counters.
type Snapshot [numCounters]uint64

// Get returns one counter.
func (s *Snapshot) Get(c Counter) uint64 { return s[c] }

func (s *Shard) count(c Counter) { s.stats.c[c]++ }
