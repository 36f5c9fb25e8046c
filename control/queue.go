package control

// The event queue: how the shards hand their lane events (events.go) to
// the control loop without waiting for the core's lock. A shard appends
// under the queue's own small lock (O(1), never held across anything
// else) and wakes the loop; the loop (Step, Tick) takes the whole queue
// and applies it under the core's lock, in the order the events came.
//
// The queue is bounded (eventQueueCap). When it is full, an event that
// its shard repeats while its cause lasts is dropped and counted
// (EventsDropped):
//   - NoSession: the next packet for the peer a second or more later asks
//     again (shard noSessionAsk), so traffic that still waits is heard;
//   - PeerSilent: repeated every noReplyAfter (5 s) per lane while the
//     lane keeps sending unanswered;
//   - LaneMisplaced: repeated at most once a second per lane while its
//     datagrams keep arriving on another shard (shard misplacedEvery).
//
// A move (PeerMoved) and a confirmation (LaneConfirmed) are reported
// once per change, so they are never dropped: one that finds the queue
// full is held in a table, coalesced with the later ones of its lane
// (moves: the first one's from, the latest one's to, so a chain A→B→C
// arrives as A→C) or of its peer (confirmations: the latest address,
// which is all LaneConfirmed keeps), and applied after the queue. The
// table holds at most one entry per lane, so it is bounded by the lanes
// there are. The queue and the table are taken together, so every held
// event came after every queued one: one lane's moves are applied in the
// order its shards reported them.

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/yip-router/yip-router/shard"
)

type eventKind uint8

const (
	evNoSession eventKind = iota
	evMoved
	evSilent
	evMisplaced
	evConfirmed
)

// event is one lane event as a shard reported it.
type event struct {
	kind       eventKind
	oldFraming bool // evSilent
	sh         int  // the shard that reported it
	peer       shard.PeerID
	index      int            // the lane (evMoved, evMisplaced, evConfirmed)
	via        int            // evMisplaced: the shard its datagrams arrive on
	from, to   netip.AddrPort // evMoved; evConfirmed: to is the lane's remote
}

// laneKey names a peer's lane.
type laneKey struct {
	peer  shard.PeerID
	index int
}

// eventQueue is the shards' events on their way to the control loop.
type eventQueue struct {
	mu sync.Mutex
	// buf is the queue, at most eventQueueCap events, oldest first. It
	// grows by append and is recycled (spare), so memory goes only to
	// the largest burst seen, and steady state allocates nothing.
	buf, spare []event
	// Moves and confirmations that found buf full, coalesced: moves by
	// lane, in the order of each lane's first held move (moveOrder);
	// confirmations by peer.
	moves     map[laneKey]event
	moveOrder []laneKey
	confirms  map[shard.PeerID]event
	// wake has a token while events wait (capacity 1).
	wake    chan struct{}
	dropped atomic.Uint64
}

func newEventQueue() *eventQueue {
	return &eventQueue{wake: make(chan struct{}, 1)}
}

// put queues e without waiting. When buf is full, a move or a
// confirmation is held, anything else dropped and counted (see above).
func (q *eventQueue) put(e event) {
	q.mu.Lock()
	full := len(q.buf) >= eventQueueCap
	switch {
	case e.kind == evMoved && full:
		k := laneKey{e.peer, e.index}
		if h, ok := q.moves[k]; ok {
			e.from = h.from
		} else {
			if q.moves == nil {
				q.moves = map[laneKey]event{}
			}
			q.moveOrder = append(q.moveOrder, k)
		}
		q.moves[k] = e
	case e.kind == evConfirmed && full:
		if q.confirms == nil {
			q.confirms = map[shard.PeerID]event{}
		}
		q.confirms[e.peer] = e
	case full:
		q.mu.Unlock()
		q.dropped.Add(1)
		return
	default:
		q.buf = append(q.buf, e)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take empties the queue: the queued events, oldest first, then the held
// ones. Give evs back with recycle once applied.
func (q *eventQueue) take() (evs, held []event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs, q.buf, q.spare = q.buf, q.spare[:0], nil
	for _, k := range q.moveOrder {
		held = append(held, q.moves[k])
	}
	for _, e := range q.confirms {
		held = append(held, e)
	}
	q.moves, q.moveOrder, q.confirms = nil, nil, nil
	return evs, held
}

// recycle gives take's buffer back for the next events.
func (q *eventQueue) recycle(evs []event) {
	clear(evs)
	q.mu.Lock()
	if cap(evs) > cap(q.spare) {
		q.spare = evs[:0]
	}
	q.mu.Unlock()
}

// Wake has a value whenever the shards queued events since the control
// loop last took them: the loop then calls Step.
func (c *Core) Wake() <-chan struct{} { return c.events.wake }

// EventsDropped counts the shards' events the full queue dropped; it only
// goes up. Each was of a kind its shard repeats while its cause lasts.
func (c *Core) EventsDropped() uint64 { return c.events.dropped.Load() }
