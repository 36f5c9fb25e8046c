// The Decoder's window of groups: where a symbol's group goes (sliding
// forwards, or resynchronising after an idle lane, never backwards), how
// groups close, expire and leave, and how each finished or never-seen group
// is counted into the loss report.

package fec

import "time"

// slotFor places group g in the window, sliding or resynchronising it as
// needed. It returns nil (and counts why) for symbols outside the window.
func (d *Decoder) slotFor(g uint32, now time.Time) *slot {
	if d.slots == nil {
		d.slots = make([]slot, d.cfg.MaxGroups)
		d.due = make([]int64, d.cfg.MaxGroups)
	}
	if !d.started {
		d.started, d.head, d.first = true, g, g
	}
	// Serial-number arithmetic: ids wrap, so g is ahead of head when the
	// signed 32-bit difference is positive and behind when negative.
	ahead := int64(int32(g - d.head))
	switch {
	case -ahead >= int64(len(d.slots)):
		// Behind the window, however long the lane has been idle: a
		// sender only moves forwards (a restarted one has new keys and
		// meets a new decoder), so this is a late or replayed datagram.
		// Letting it move the window back would make every genuine
		// group after it "too far ahead".
		d.stats.Late++
		return nil
	case ahead > int64(d.cfg.MaxAhead):
		if now.Sub(d.lastSeen) < d.cfg.GroupTTL {
			d.stats.FarAhead++
			return nil
		}
		// Idle long enough that nothing in the window is still useful:
		// we lost a long outage's worth of groups. Resynchronise
		// forwards only.
		d.stats.Resyncs++
		for i := range d.slots {
			d.retire(&d.slots[i])
		}
		d.head, d.first = g, g
	case ahead > 0:
		// Slide: every slot the new groups map to holds a group that now
		// falls behind the window.
		n := int64(len(d.slots))
		steps := min(ahead, n)
		for i := int64(1); i <= steps; i++ {
			s := &d.slots[(d.head+uint32(i))&d.mask]
			if leaving := d.head + uint32(i) - uint32(n); s.start == 0 || s.group != leaving {
				d.unseen(leaving)
			}
			d.retire(s)
		}
		for id := d.head + 1; int32(g-uint32(n)-id) >= 0; id++ {
			d.unseen(id) // jumped over without ever having a slot
		}
		// The groups between the old head and g that keep a slot: a
		// symbol of each may still arrive (reordering) within GroupTTL;
		// Tick counts those that do not.
		first := d.head + 1
		if ahead > n {
			first = g - uint32(n) + 1
		}
		if lo := g - uint32(n); int32(lo-d.first) > 0 {
			d.first = lo // the ids before the window are never counted again: keep first near them, so its serial comparison never wraps
		}
		for id := first; id != g; id++ {
			s := &d.slots[id&d.mask]
			*s = slot{group: id, state: stateMissing, start: monoNs(now)}
			d.due[id&d.mask] = s.start
			if exp := now.Add(d.cfg.GroupTTL); d.nextExpiry.IsZero() || exp.Before(d.nextExpiry) {
				d.nextExpiry = exp
			}
		}
		d.head = g
	}
	d.lastSeen = now
	s := &d.slots[g&d.mask]
	if s.state == stateFree || s.state == stateMissing || s.group != g {
		counted := false
		if s.state != stateMissing || s.group != g {
			d.retire(s)
		} else {
			// A missing group that arrives after all. If Tick already
			// counted it lost, its loss report may be out: it is not
			// counted again (account).
			counted = s.accounted
		}
		*s = slot{group: g, state: stateOpen, start: monoNs(now), countedLost: counted}
		d.due[g&d.mask] = s.start
		if exp := now.Add(d.cfg.GroupTTL); d.nextExpiry.IsZero() || exp.Before(d.nextExpiry) {
			d.nextExpiry = exp
		}
	}
	return s
}

// close gives up on recovering s (expired or evicted) but keeps its
// bitmaps, so a late original is still delivered once and never twice.
func (d *Decoder) close(s *slot) {
	if s.state == stateMissing {
		if !s.accounted {
			s.accounted = true
			d.due[s.group&d.mask] = 0
			d.unseen(s.group)
		}
		return
	}
	if s.state == stateOpen {
		s.state = stateClosed
	}
	d.freeBufs(s)
	d.account(s)
}

// retire removes s from the window entirely.
func (d *Decoder) retire(s *slot) {
	if s.state == stateFree {
		return
	}
	d.close(s)
	s.state = stateFree
}

// unseen counts group id, which never arrived, as lost: at least one data
// symbol (a group gets its id with its first). Without it a lane whose
// groups are single packets (pings, a sparse flow, a lane without parity)
// would report no loss however much it lost. It adds no run: how long
// the burst that took a whole group was is unknown, and counting it as
// one symbol would make bursty loss look independent. Groups before the
// decoder's first are not counted.
func (d *Decoder) unseen(id uint32) {
	if int32(id-d.first) <= 0 {
		return
	}
	d.stats.Unrecoverable++
	d.stats.LostData++
	d.loss.Expected = satAdd(d.loss.Expected, 1)
	d.loss.Unrecovered = satAdd(d.loss.Unrecovered, 1)
}

// account adds a finished group to the loss counters, once.
func (d *Decoder) account(s *slot) {
	if s.accounted {
		return
	}
	s.accounted = true
	d.due[s.group&d.mask] = 0
	if s.countedLost {
		return
	}
	// Without parity the group's true K is unknown (a flushed group is
	// shorter than its data symbols announce); assume it ended at the
	// highest data index seen, so a lost parity never counts as lost data.
	// Its parity count is unknown too when it ended early: a sender may
	// give such a group fewer than the R its data announced
	// (Encoder.SetPartialParity), so only a full group counts R parity
	// as lost, lest the report overstate loss and bursts.
	k, r := int(s.maxIdx), int(s.dataR)
	if s.maxIdx < s.dataK {
		r = 0
	}
	if s.kKnown {
		k, r = int(s.k), int(s.r)
	}
	recv := s.present.count()
	d.loss.Expected = satAdd(d.loss.Expected, uint32(max(k+r, recv)))
	d.loss.Received = satAdd(d.loss.Received, uint32(recv))
	d.loss.Runs = satAdd(d.loss.Runs, uint32(s.present.runsMissingBelow(k+r)))
	if missing := k - s.delivered.countBelow(k); missing > 0 {
		d.stats.Unrecoverable++
		d.stats.LostData += uint64(missing)
		d.loss.Unrecovered = satAdd(d.loss.Unrecovered, uint32(missing))
	}
}

// Tick expires groups older than GroupTTL. Call it every few milliseconds
// from the lane loop; Push never waits on it. It costs one comparison
// until the oldest unfinished group falls due (a hub ticks thousands of
// idle lanes), and reports whether it closed a group.
func (d *Decoder) Tick(now time.Time) bool {
	if d.nextExpiry.IsZero() || now.Before(d.nextExpiry) {
		return false
	}
	closed := false
	var next time.Time
	nowNs := monoNs(now)
	for i, start := range d.due {
		if start == 0 {
			continue // free, or accounted for
		}
		if left := start + int64(d.cfg.GroupTTL) - nowNs; left > 0 {
			if exp := now.Add(time.Duration(left)); next.IsZero() || exp.Before(next) {
				next = exp
			}
			continue
		}
		s := &d.slots[i]
		if s.state == stateOpen {
			d.stats.Expired++
		}
		d.close(s)
		closed = true
	}
	d.nextExpiry = next
	return closed
}
