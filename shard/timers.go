package shard

import "time"

// Timers and counters: the poll loop (loop_linux.go) calls tick when the
// first FEC deadline falls due or every idlePoll, and publish with it. tick
// flushes partial FEC groups (their parity leaves through egress.go), expires
// decoder groups, previous keys (keyset.go) and waiting packets; publish
// copies the shard's plain counters (and what the keys' decoders counted)
// to the atomics Snapshot reads, and the lengths the lanes sent to their
// peers' WireLens.

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
		for _, ks := range ln.keysets() {
			if ks == nil {
				continue
			}
			if ks.encBusy {
				if ks.enc.Tick(s.now) {
					s.drainParity(ln, ks)
				}
				if d, ok := ks.enc.Deadline(); !ok {
					ks.encBusy = false
				} else if next.IsZero() || d.Before(next) {
					next = d
				}
			}
			if ks.dec.Tick(s.now) {
				ks.decDirty = true
			}
		}
		s.expireKeys(ln)
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
		for _, ks := range ln.keysets() {
			if ks != nil {
				ks.dec.Trim()
			}
		}
	}
}

func (s *Shard) publish() {
	// Only decoders that saw a symbol or expired a group since the last
	// publication can have new counts: a hub's thousands of idle lanes
	// cost nothing here.
	for _, ln := range s.table.owned {
		for _, ks := range ln.keysets() {
			if ks != nil && ks.decDirty {
				ks.decDirty = false
				s.foldDecoder(ks)
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
