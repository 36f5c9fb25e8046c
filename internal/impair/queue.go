package impair

// Queue holds frames until they are due: a fixed pool of buffers (slots)
// and a min-heap of queued slots ordered by due time, then arrival. It
// does not allocate after NewQueue and is not safe for concurrent use.
type Queue struct {
	mem  []byte
	size int
	free []int32
	heap []item
	seq  uint64
}

type item struct {
	due  int64
	seq  uint64
	slot int32
	n    int32
}

// NewQueue returns a queue of slots buffers of size bytes each.
func NewQueue(slots, size int) *Queue {
	q := &Queue{mem: make([]byte, slots*size), size: size, free: make([]int32, slots), heap: make([]item, 0, slots)}
	for i := range q.free {
		q.free[i] = int32(slots - 1 - i)
	}
	return q
}

// Get takes a free buffer; ok is false when all are in use.
func (q *Queue) Get() (slot int32, ok bool) {
	if len(q.free) == 0 {
		return -1, false
	}
	slot = q.free[len(q.free)-1]
	q.free = q.free[:len(q.free)-1]
	return slot, true
}

// Put returns a buffer to the pool.
func (q *Queue) Put(slot int32) { q.free = append(q.free, slot) }

// Buf is slot's buffer.
func (q *Queue) Buf(slot int32) []byte {
	o := int(slot) * q.size
	return q.mem[o : o+q.size : o+q.size]
}

// Free is the number of free buffers.
func (q *Queue) Free() int { return len(q.free) }

// Len is the number of queued frames.
func (q *Queue) Len() int { return len(q.heap) }

// Push queues slot, holding a frame of n bytes, until due.
func (q *Queue) Push(slot int32, n int, due int64) {
	q.seq++
	q.heap = append(q.heap, item{due: due, seq: q.seq, slot: slot, n: int32(n)})
	h := q.heap
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// Peek returns the due time of the earliest frame; ok is false when empty.
func (q *Queue) Peek() (due int64, ok bool) {
	if len(q.heap) == 0 {
		return 0, false
	}
	return q.heap[0].due, true
}

// Pop removes the earliest frame and returns its slot and length; the
// caller Puts the slot back when done with it.
func (q *Queue) Pop() (slot int32, n int) {
	h := q.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	q.heap = h
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top.slot, int(top.n)
}

func (a item) less(b item) bool { return a.due < b.due || (a.due == b.due && a.seq < b.seq) }
