package shard

import "time"

// Timers and counters: the poll loop (loop_linux.go) calls tick every
// idlePoll, and publish with it, and tickFEC when an FEC deadline falls
// due in between. tick runs the owned lanes' timers (an idle lane's only
// every idleTick: idleWake): it expires decoder groups, previous keys
// (keyset.go) and waiting packets, and flushes partial FEC groups through
// tickFEC (their parity leaves through egress.go). tickFEC visits only
// the keys whose encoder may hold a partial group (Shard.flushing): a
// flush deadline comes every few milliseconds on a busy shard, and a
// hub's thousands of idle lanes must not be visited at each one. publish
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

// tick runs the lanes' timers: decoder expiry, the end of previous keys,
// waiting packets' age, and the FEC flush of partial groups (tickFEC). It
// returns the earliest pending FEC deadline (zero if none).
func (s *Shard) tick() time.Time {
	s.refillRoam()
	// Groups past their flush deadline close first, with the table in
	// force while they filled: the timers may find the lane quiet now
	// (controlTimers), which caps small packets' groups.
	s.tickFEC()
	now := int64(s.now.Sub(stampEpoch))
	for i, ln := range s.table.owned {
		if w := s.table.wakes[i]; w != 0 && now < w {
			continue // idle: visited every idleTick
		}
		s.controlTimers(ln)
		for _, ks := range ln.keysets() {
			if ks != nil && ks.dec.Tick(s.now) {
				ks.decDirty = true
			}
		}
		s.expireKeys(ln)
		s.expireTimestamps(ln)
		if s.table.owned[i] == ln { // the timers only queue what removes lanes
			s.table.wakes[i] = s.idleWake(ln)
		}
	}
	s.expireWaiting()
	if s.now.Sub(s.trimAt) >= time.Second {
		s.trimAt = s.now
		s.trimIdle()
	}
	return s.tickFEC()
}

// idleWake is when tick must next visit ln (laneTable.wakes): at every
// tick (0) while the lane sent or received within idleAfter or has
// something pending (a hello, a move to report, a follow proposed), else
// idleTick from now. A hub's thousands of idle lanes then cost a visit
// each every idleTick, not every idlePoll; their timers (loss reports
// about once a second, keepalives of seconds, expiry of previous keys)
// move by at most idleTick.
func (s *Shard) idleWake(ln *lane) int64 {
	if s.now.Sub(ln.lastRx) < idleAfter || s.now.Sub(ln.lastTx) < idleAfter ||
		ln.helloDue || ln.movePending || ln.followTo.IsValid() || ln.helloRepeating() {
		return 0
	}
	if w := int64(s.now.Add(idleTick).Sub(stampEpoch)); w != 0 {
		return w
	}
	return 1 // 0 says "at the next run"
}

// flushEntry is keys of an owned lane whose encoder may hold a partial
// group (keyset.encBusy).
type flushEntry struct {
	ln *lane
	ks *keyset
}

// noteBusy records that ks, keys of ln (owned here), may now hold a
// partial FEC group, for tickFEC to flush.
func (s *Shard) noteBusy(ln *lane, ks *keyset) {
	if !ks.encBusy {
		ks.encBusy = true
		s.flushing = append(s.flushing, flushEntry{ln, ks})
	}
}

// tickFEC flushes the partial FEC groups whose deadline passed (the
// previous keys' encoder too: a rekey responder sends under them until
// confirmed) and returns the earliest deadline still pending (zero if
// none). Keys whose encoder holds nothing, or that are no longer their
// lane's, leave the list.
func (s *Shard) tickFEC() time.Time {
	var next time.Time
	keep := s.flushing[:0]
	for _, e := range s.flushing {
		ln, ks := e.ln, e.ks
		if ks != ln.cur && ks != ln.prev {
			ks.encBusy = false // dropped keys (dropKeys)
			continue
		}
		if ks.enc.Tick(s.now) {
			s.drainParity(ln, ks)
		}
		d, ok := ks.enc.Deadline()
		if !ok {
			ks.encBusy = false
			continue
		}
		if next.IsZero() || d.Before(next) {
			next = d
		}
		keep = append(keep, e)
	}
	clear(s.flushing[len(keep):])
	s.flushing = keep
	return next
}

// unflush forgets ln's keys in the flush list: ln leaves this shard
// (laneTable.forget, through foldLane), and another shard may take it.
func (s *Shard) unflush(ln *lane) {
	keep := s.flushing[:0]
	for _, e := range s.flushing {
		if e.ln != ln {
			keep = append(keep, e)
		}
	}
	clear(s.flushing[len(keep):])
	s.flushing = keep
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
