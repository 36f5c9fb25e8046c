package ring

import (
	"fmt"
	"net/netip"
)

// Packet is one buffer of a Pool. Buf always has the pool's buffer size as
// its capacity and N is how many bytes are in use. Where they start is the
// user's convention, not a field: package shard reads a TUN packet to
// Buf[headroom:] (room in front to write the header in place) and hands a
// datagram between shards at Buf[:N].
type Packet struct {
	Buf   []byte
	N     int
	Lane  int32          // lane the packet is for or came from, as the shard sets it
	Aux   uint32         // pipeline field (e.g. the peer of a handed-off packet)
	Owner uint16         // the pool (shard) the buffer belongs to
	Meta  uint16         // pipeline field (e.g. what a handed-off packet is)
	Addr  netip.AddrPort // pipeline field (e.g. where a datagram came from)
}

// Pool is a fixed arena of packet buffers owned by one shard: one slab
// allocated at start, a free stack, no per-packet allocation and no
// sync.Pool on the hot path. Not safe for concurrent use: buffers lent to
// other shards come back through a ring and are Put by the owner.
type Pool struct {
	id   uint16
	size int
	slab []byte
	pkts []Packet
	free []*Packet
	low  int // fewest free buffers ever seen (high-water mark of use)
}

// NewPool allocates n buffers of size bytes for owner id.
func NewPool(id uint16, n, size int) (*Pool, error) {
	if n <= 0 || size <= 0 || n > 1<<20 || size > 1<<17 {
		return nil, fmt.Errorf("ring: pool of %d buffers of %d bytes is out of range", n, size)
	}
	p := &Pool{id: id, size: size, slab: make([]byte, n*size), pkts: make([]Packet, n), free: make([]*Packet, n)}
	for i := range p.pkts {
		p.pkts[i] = Packet{Buf: p.slab[i*size : (i+1)*size : (i+1)*size], Owner: id}
		p.free[i] = &p.pkts[i]
	}
	p.low = n
	return p, nil
}

// ID is the owner id stamped on every packet of this pool.
func (p *Pool) ID() uint16 { return p.id }

// Size is the capacity of each buffer.
func (p *Pool) Size() int { return p.size }

// Cap is the number of buffers.
func (p *Pool) Cap() int { return len(p.pkts) }

// Free is the number of buffers available.
func (p *Pool) Free() int { return len(p.free) }

// LowWater is the fewest free buffers there ever were.
func (p *Pool) LowWater() int { return p.low }

// Get returns a free buffer, or nil when the pool is exhausted (the caller
// drops and counts: memory stays bounded whatever the input).
func (p *Pool) Get() *Packet {
	n := len(p.free)
	if n == 0 {
		return nil
	}
	pk := p.free[n-1]
	p.free = p.free[:n-1]
	if n-1 < p.low {
		p.low = n - 1
	}
	pk.N, pk.Lane, pk.Aux, pk.Meta, pk.Addr = 0, 0, 0, 0, netip.AddrPort{}
	return pk
}

// Put returns a buffer. It panics on a buffer of another pool or on a
// double Put that would overflow the stack: both are programming errors
// that would otherwise corrupt another shard's memory.
func (p *Pool) Put(pk *Packet) {
	if pk.Owner != p.id || len(p.free) == len(p.pkts) {
		panic(fmt.Sprintf("ring: Put of packet owned by %d into pool %d (%d/%d free)", pk.Owner, p.id, len(p.free), len(p.pkts)))
	}
	p.free = append(p.free, pk)
}
