package shard

import (
	"fmt"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/ring"
)

// The mesh: packets one shard hands another (and the shards by id, for
// the commands one queues on another: Shard.tell). egress.go pushes TUN packets
// for a lane another shard owns, ingress.go datagrams that arrived on the
// wrong shard; the owner takes them (takeMesh) into its own egress
// (sendData) or ingress, and gives the buffers back over the return rings.

// MeshRingSize is the capacity of each shard-to-shard ring.
const MeshRingSize = 1024

// Mesh joins the shards: for every ordered pair (from, to) a forward ring
// of packets (TUN packets for a lane the other shard owns, or datagrams that
// arrived on the wrong shard) and a return ring that gives the buffers back
// to the pool they came from. Each ring has one producer and one consumer.
type Mesh struct {
	n      int
	fwd    [][]*ring.SPSC[*ring.Packet] // fwd[from][to]
	ret    [][]*ring.SPSC[*ring.Packet] // ret[from][to]: buffers going home to `to`
	wakers []*ring.Waker
	// shards are the mesh's shards by id, each set once by New: a shard
	// queues commands on the others (Do) with them (Shard.tell).
	shards []*Shard
}

// NewMesh builds the rings and one waker per shard.
func NewMesh(n int) (*Mesh, error) {
	if n < 1 || n > crypto.MaxLanes {
		return nil, fmt.Errorf("shard: %d shards out of range 1..%d (one lane each)", n, crypto.MaxLanes)
	}
	m := &Mesh{n: n, fwd: make([][]*ring.SPSC[*ring.Packet], n), ret: make([][]*ring.SPSC[*ring.Packet], n), shards: make([]*Shard, n)}
	for i := range n {
		w, err := ring.NewWaker()
		if err != nil {
			m.Close()
			return nil, err
		}
		m.wakers = append(m.wakers, w)
		m.fwd[i] = make([]*ring.SPSC[*ring.Packet], n)
		m.ret[i] = make([]*ring.SPSC[*ring.Packet], n)
		for j := range n {
			if i == j {
				continue
			}
			m.fwd[i][j], _ = ring.NewSPSC[*ring.Packet](MeshRingSize)
			m.ret[i][j], _ = ring.NewSPSC[*ring.Packet](MeshRingSize)
		}
	}
	return m, nil
}

// Size is the number of shards.
func (m *Mesh) Size() int { return m.n }

// Close releases the wakers' eventfds.
func (m *Mesh) Close() {
	for _, w := range m.wakers {
		w.Close()
	}
}

// Packet kinds on the mesh rings (ring.Packet.Meta).
const (
	meshEgress  = 1 // a TUN packet for a lane the receiving shard owns (Aux: peer)
	meshIngress = 2 // a datagram that arrived on the wrong shard (Addr: source)
)

// takeMesh processes what other shards handed us and takes back our
// buffers they are done with.
func (s *Shard) takeMesh() int {
	work := 0
	for from := range s.mesh.Size() {
		if from == s.id {
			continue
		}
		for {
			n := s.mesh.ret[from][s.id].Pop(s.popBuf)
			for _, p := range s.popBuf[:n] {
				s.pool.Put(p)
			}
			clear(s.popBuf[:n])
			if n == 0 {
				break
			}
		}
		if l := uint64(s.mesh.fwd[from][s.id].Len()); l > s.stats.c[RingHighWater] {
			s.stats.c[RingHighWater] = l
		}
		for {
			n := s.mesh.fwd[from][s.id].Pop(s.popBuf)
			if n == 0 {
				break
			}
			work += n
			s.stats.c[TakenOver] += uint64(n)
			for _, p := range s.popBuf[:n] {
				switch p.Meta {
				case meshEgress:
					pl := s.table.peer(PeerID(p.Aux))
					if pl != nil && int(p.Lane) < len(pl.local) && pl.local[p.Lane] == nil && pl.owners[p.Lane] != s.id {
						// The lane moved on while the packet was on
						// its way (place.go): pass it on.
						o := pl.owners[p.Lane]
						s.handoff[o] = append(s.handoff[o], p)
						if len(s.handoff[o]) == cap(s.handoff[o]) {
							s.flushHandoff(o)
						}
						continue
					}
					if pl == nil || int(p.Lane) >= len(pl.local) || pl.local[p.Lane] == nil {
						// The lane's install is still in our control
						// queue: wait for it like any sessionless packet.
						s.wait(PeerID(p.Aux), p)
						continue
					}
					s.sendData(pl.local[p.Lane], p)
				case meshIngress:
					s.ingressVia(-1, from, p.Buf[:p.N], p.Addr)
					s.release(p)
				default:
					s.release(p)
				}
			}
			clear(s.popBuf[:n])
		}
	}
	return work
}
