package ring

import (
	"fmt"
	"sync/atomic"
)

// cacheLine keeps producer- and consumer-owned words on separate lines, so
// the two cores do not bounce one line on every push and pop.
const cacheLine = 64

// SPSC is a bounded lock-free single-producer single-consumer ring.
// Exactly one goroutine may push and exactly one may pop; they may differ.
// The producer publishes with a release store of tail after writing the
// slots; the consumer acquires tail before reading them (sync/atomic
// operations are sequentially consistent, which is stronger).
type SPSC[T any] struct {
	_    [cacheLine]byte
	tail atomic.Uint64 // next slot to write; written by the producer
	// headCache is the producer's last view of head, refreshed only when
	// the ring looks full: most pushes then touch no consumer-owned line.
	headCache uint64
	_         [cacheLine - 16]byte
	head      atomic.Uint64 // next slot to read; written by the consumer
	tailCache uint64        // the consumer's last view of tail
	_         [cacheLine - 16]byte
	mask      uint64
	slots     []T
}

// NewSPSC returns a ring with capacity size, which must be a power of two.
func NewSPSC[T any](size int) (*SPSC[T], error) {
	if size < 2 || size&(size-1) != 0 || size > 1<<24 {
		return nil, fmt.Errorf("ring: size %d must be a power of two in [2, 2^24]", size)
	}
	return &SPSC[T]{mask: uint64(size - 1), slots: make([]T, size)}, nil
}

// Cap is the ring's capacity.
func (r *SPSC[T]) Cap() int { return len(r.slots) }

// Len is the number of queued items (approximate while the other side runs).
func (r *SPSC[T]) Len() int { return int(r.tail.Load() - r.head.Load()) }

// Push appends as many items of batch as fit and returns how many it took.
// Producer only.
func (r *SPSC[T]) Push(batch []T) int {
	t := r.tail.Load()
	free := uint64(len(r.slots)) - (t - r.headCache)
	if free < uint64(len(batch)) {
		r.headCache = r.head.Load()
		free = uint64(len(r.slots)) - (t - r.headCache)
	}
	n := min(uint64(len(batch)), free)
	for i := range n {
		r.slots[(t+i)&r.mask] = batch[i]
	}
	if n > 0 {
		r.tail.Store(t + n)
	}
	return int(n)
}

// Pop moves up to len(batch) items into batch and returns how many.
// Consumer only. Popped slots are zeroed so the ring holds no stale
// references (pointers would otherwise stay reachable).
func (r *SPSC[T]) Pop(batch []T) int {
	h := r.head.Load()
	avail := r.tailCache - h
	if avail < uint64(len(batch)) {
		r.tailCache = r.tail.Load()
		avail = r.tailCache - h
	}
	n := min(uint64(len(batch)), avail)
	var zero T
	for i := range n {
		s := &r.slots[(h+i)&r.mask]
		batch[i] = *s
		*s = zero
	}
	if n > 0 {
		r.head.Store(h + n)
	}
	return int(n)
}
