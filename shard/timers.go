package shard

import (
	"time"

	"github.com/yip-router/yip-router/fec"
)

// Timers and counters: the poll loop (loop_linux.go) calls tick when the
// first FEC deadline falls due or every idlePoll, and publish with it. tick
// flushes partial FEC groups (their parity leaves through egress.go), expires
// decoder groups, previous keys and waiting packets; publish copies the
// shard's plain counters to the atomics Snapshot reads, and the lengths the
// lanes sent to their peers' WireLens.

// flushAll writes what waits for the TUN queue and sends every staged
// datagram and hand-off.
func (s *Shard) flushAll() {
	s.flushTun()
	for c := range s.txN {
		s.flushConn(c)
	}
	for o := range s.handoff {
		s.flushHandoff(o)
	}
	for o := range s.retOut {
		s.flushReturns(o)
	}
}

// tick runs the lanes' timers: FEC flush of partial groups (the previous
// keys' encoder too: a rekey responder sends under them until confirmed),
// decoder expiry, the end of previous keys, waiting packets' age. It
// returns the earliest pending FEC deadline (zero if none).
func (s *Shard) tick() time.Time {
	var next time.Time
	s.refillRoam()
	for _, ln := range s.table.owned {
		s.controlTimers(ln)
		for _, l := range []*lane{ln, ln.prev} {
			if l == nil {
				continue
			}
			if l.encBusy {
				if l.enc.Tick(s.now) {
					s.drainParity(ln, l)
				}
				if d, ok := l.enc.Deadline(); !ok {
					l.encBusy = false
				} else if next.IsZero() || d.Before(next) {
					next = d
				}
			}
			if l.dec.Tick(s.now) {
				l.decDirty = true
			}
		}
		if ln.prev != nil && ln.confirmed && s.now.Sub(ln.installed) > prevKeep {
			s.dropKeys(ln, ln.prev)
			ln.prev = nil
		}
	}
	s.expireWaiting()
	if s.now.Sub(s.trimAt) >= time.Second {
		s.trimAt = s.now
		s.trimIdle()
	}
	return next
}

// trimIdle releases the FEC decoder memory (symbol slabs, codec caches) of
// lanes that received nothing for laneIdleTrim: at a hub most sessions sit
// idle, and a burst of loss can leave a decoder holding up to a MiB.
func (s *Shard) trimIdle() {
	for _, ln := range s.table.owned {
		if s.now.Sub(ln.lastRx) < laneIdleTrim {
			continue
		}
		ln.dec.Trim()
		if ln.prev != nil {
			ln.prev.dec.Trim()
		}
	}
}

func (s *Shard) publish() {
	// Only decoders that saw a symbol or expired a group since the last
	// publication can have new counts: a hub's thousands of idle lanes
	// cost nothing here.
	for _, ln := range s.table.owned {
		for l := ln; l != nil; l = l.prev {
			if l.decDirty {
				l.decDirty = false
				s.foldDecoder(l)
			}
		}
		// Likewise only lanes that sent data add to their peer's
		// length sample.
		if ln.sizeN != ln.sizePub && ln.cfg.Lens != nil {
			s.publishSizes(ln, ln.cfg.Lens)
		}
	}
	s.stats.c[PoolHighWater] = uint64(s.pool.Cap() - s.pool.LowWater())
	s.stats.publish()
}

// foldDecoder adds what l's decoder counted since its last fold to the
// shard's fec_recovered, drop_duplicate and drop_fec_window. A decoder's
// counts are per lane and go with it when a rekey or a removal drops the
// lane, and published counters must never decrease (Prometheus counters),
// so the shard keeps the totals: publish folds every live decoder, and
// whatever drops a lane or its previous keys folds them first. Folding
// twice adds nothing.
func (s *Shard) foldDecoder(l *lane) {
	st := l.dec.Stats()
	s.stats.c[FECRecovered] += st.Recovered - l.folded.Recovered
	s.stats.c[DropDuplicate] += st.Duplicates - l.folded.Duplicates
	s.stats.c[DropFECWindow] += windowDrops(st) - windowDrops(l.folded)
	s.stats.c[FECEvicted] += st.Evicted - l.folded.Evicted
	s.stats.c[FECNotStored] += st.NotStored - l.folded.NotStored
	l.folded = st
}

// dropKeys folds the decoder of l, keys that lane ln is letting go of,
// into the shard's counters and its counts into ln's carry.
func (s *Shard) dropKeys(ln, l *lane) {
	s.foldDecoder(l)
	st := l.dec.Stats()
	ln.fecCarry.recovered += st.Recovered
	ln.fecCarry.lost += st.LostData
}

// foldLane folds ln's decoder and its previous keys' (ln may be nil).
func (s *Shard) foldLane(ln *lane) {
	if ln == nil {
		return
	}
	s.foldDecoder(ln)
	if ln.prev != nil {
		s.foldDecoder(ln.prev)
	}
}

// windowDrops is what drop_fec_window counts: symbols outside the window,
// invalid or inconsistent.
func windowDrops(st fec.Stats) uint64 {
	return st.Late + st.FarAhead + st.Invalid + st.Inconsistent
}
