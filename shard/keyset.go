package shard

import (
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// Keysets: what one session's keys do on a lane. A lane (lane.go) is the
// path to one of a peer's sockets and everything learnt about it; the keys
// that seal, frame, FEC-code and open its datagrams change at every rekey
// (about every two minutes), and so does everything that must start afresh
// with them: the AEAD counters and replay window, the FEC groups on both
// ends, whether the peer has used the keys yet. So a lane holds its
// current keyset and, after a rekey, the previous one for prevKeep, for
// the datagrams and FEC groups still in flight under it (wireguard-go's
// Keypairs{current, previous}). A rekey makes a keyset and moves pointers
// (Shard.rotate); nothing of the path is copied, so nothing of it can be
// forgotten. All of a lane's keys use its path: the peer that holds the
// previous keys is the one that just handshook, at the lane's address,
// which its datagrams under any of the keys may move (roam.go).

// keyset is one session's keys on a lane. Like its lane, it is touched only
// by the shard goroutine that owns the lane.
type keyset struct {
	sealer *crypto.Sealer // our sending AEAD and its counter
	txf    crypto.Framer
	enc    *fec.Encoder
	opener *crypto.Opener // the peer's sending AEAD and the replay window
	rxf    crypto.Framer
	dec    *fec.Decoder
	// deliver is what dec hands this keyset's data symbols to:
	// Shard.deliverSymbol bound to the lane and the keyset, made once
	// (bindDeliver) so ingress passes it to the decoder without
	// allocating.
	deliver fec.Deliver
	// installed is when the keys came (a handshake): the previous keys
	// last prevKeep from then, and a lane is not silent for longer than
	// its keys are old (checkSilence).
	installed time.Time
	// confirmed: a datagram arrived under these keys, so the peer has
	// them (a rekey responder sends under the previous keys until then:
	// LaneConfig.HoldTx, sendKeys).
	confirmed bool
	// decDirty: the decoder may have counted something since publish
	// last folded it. encBusy: the encoder may hold a partial group
	// (the keys are in their shard's Shard.flushing, which tickFEC
	// visits; while a moved lane is between shards, in none until the
	// adopting shard adds them: adoptLane).
	decDirty, encBusy bool
	// folded is the decoder's counters as last added to the shard's: the
	// shard keeps the totals because dropping the keys drops the decoder
	// with its counts (Shard.foldDecoder).
	folded fec.Stats
	// oldFraming: a datagram from the lane's remote was framed by wire
	// version 1 under these keys (noteOldFraming, after v1Tries tries);
	// checkSilence says so. New keys try again.
	oldFraming bool
	v1Tries    uint8
}

// newKeyset makes the keys cfg brings, installed at now. A rekey
// responder's (HoldTx) are unconfirmed until the peer uses them.
func newKeyset(cfg *LaneConfig, now time.Time) (*keyset, error) {
	enc, err := fec.NewEncoder(cfg.FEC)
	if err != nil {
		return nil, err
	}
	return &keyset{
		sealer:    crypto.NewSealer(&cfg.Send.AEAD),
		txf:       crypto.NewFramer(&cfg.Send),
		enc:       enc,
		opener:    crypto.NewOpener(&cfg.Recv.AEAD),
		rxf:       crypto.NewFramer(&cfg.Recv),
		dec:       fec.NewDecoder(cfg.Window),
		installed: now,
		confirmed: !cfg.HoldTx,
	}, nil
}

// keysets is ln's current and previous keys (nil: none), for the loops that
// run both: a value, so ranging over it allocates nothing.
func (ln *lane) keysets() [2]*keyset { return [2]*keyset{ln.cur, ln.prev} }

// sendKeys is the keys that seal what ln sends: its previous keys while a
// rekey responder waits for the peer to use the new ones.
func (ln *lane) sendKeys() *keyset {
	if !ln.cur.confirmed && ln.prev != nil {
		return ln.prev
	}
	return ln.cur
}

// rotate makes ks ln's current keys. The keys they replace become the
// previous ones, which the peer may still send under; if the peer never
// used them (our response to its rekey was lost and it retried), the keys
// it still holds are the previous ones, which stay. Older keys go: the
// peer holds at most the keys before the newest it has.
func (s *Shard) rotate(ln *lane, ks *keyset) {
	old := ln.cur
	switch {
	case ln.prev == nil:
	case !old.confirmed:
		s.dropKeys(ln, old)
		old = ln.prev
	default:
		s.dropKeys(ln, ln.prev)
	}
	ln.cur, ln.prev = ks, old
}

// expireKeys drops ln's previous keys once its current ones are confirmed
// and prevKeep old: nothing still in flight is under the previous ones.
func (s *Shard) expireKeys(ln *lane) {
	if ln.prev != nil && ln.cur.confirmed && s.now.Sub(ln.cur.installed) > prevKeep {
		s.dropKeys(ln, ln.prev)
		ln.prev = nil
	}
}

// fecCounts is ln's data symbols recovered and lost for good, under every
// key it has held.
func (ln *lane) fecCounts() (recovered, lost uint64) {
	recovered, lost = ln.fecCarry.recovered, ln.fecCarry.lost
	for _, ks := range ln.keysets() {
		if ks != nil {
			st := ks.dec.Stats()
			recovered += st.Recovered
			lost += st.LostData
		}
	}
	return recovered, lost
}

// foldDecoder adds what ks's decoder counted since its last fold to the
// shard's fec_recovered, drop_duplicate, drop_fec_window, fec_evicted and
// fec_not_stored. A decoder's counts go with its keys when a rekey or a
// removal drops them, and published counters must never decrease
// (Prometheus counters), so the shard keeps the totals: publish folds every
// live decoder, and whatever drops keys folds them first. Folding twice
// adds nothing.
func (s *Shard) foldDecoder(ks *keyset) {
	st := ks.dec.Stats()
	s.stats.c[FECRecovered] += st.Recovered - ks.folded.Recovered
	s.stats.c[DropDuplicate] += st.Duplicates - ks.folded.Duplicates
	s.stats.c[DropFECWindow] += windowDrops(st) - windowDrops(ks.folded)
	s.stats.c[FECEvicted] += st.Evicted - ks.folded.Evicted
	s.stats.c[FECNotStored] += st.NotStored - ks.folded.NotStored
	ks.folded = st
}

// dropKeys folds the decoder of ks, keys that lane ln is letting go of,
// into the shard's counters and its counts into ln's carry.
func (s *Shard) dropKeys(ln *lane, ks *keyset) {
	s.foldDecoder(ks)
	st := ks.dec.Stats()
	ln.fecCarry.recovered += st.Recovered
	ln.fecCarry.lost += st.LostData
}

// foldLane folds the decoders of ln's keys (ln may be nil): the table
// calls it for a lane it stops owning.
func (s *Shard) foldLane(ln *lane) {
	if ln == nil {
		return
	}
	s.unflush(ln)
	for _, ks := range ln.keysets() {
		if ks != nil {
			s.foldDecoder(ks)
		}
	}
}

// windowDrops is what drop_fec_window counts: symbols outside the window,
// invalid or inconsistent.
func windowDrops(st fec.Stats) uint64 {
	return st.Late + st.FarAhead + st.Invalid + st.Inconsistent
}
