// A loss-based flow's slow start in closed loop: the start-up guess and
// the first choices, through 5% loss in bursts of 4.

package fec

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"
)

// simSlowStart sends a slow start through the real Encoder, a Gilbert
// channel and the real Decoder, the Adapter driving the encoder as a lane
// does: 10 packets in the first 55 ms round trip, twice as many in each
// next, up to 17,700 a second (200 Mbit/s of full-size packets), in bursts
// of 16 back to back (a sender's segmentation offload), the rest of each
// round trip idle. The peer reports at 250, 500, 750 and 1000 ms (the
// early reports), the fill the rate over the last 50 ms or since the last
// report, whichever is more (as the shard's). It returns how many packets
// sent in the first second were lost for good, and the parity share.
func simSlowStart(t testing.TB, p, burst float64, seed uint64) (lost int, parity float64) {
	const (
		rtt     = 55 * time.Millisecond
		maxRate = 17700
		bunch   = 16
		span    = time.Second
	)
	lose := gilbertChannel(rand.New(rand.NewPCG(seed, 99)), p, burst)
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetRTT(rtt)
	a.SetLongGroups(true)
	k, r := a.Ratio()
	e, _ := NewEncoder(EncoderConfig{K: k, R: r, FlushTimeout: FlushFor(rtt)})
	e.SetDepth(a.Depth())
	d := NewDecoder(DecoderConfig{})
	got := map[uint64]bool{}
	deliver := func(b []byte, _ bool) bool { got[binary.BigEndian.Uint64(b)] = true; return true }
	now := t0
	var par, dat int
	wire := func(m Meta, b []byte) {
		if m.Kind == KindParity {
			par++
		} else {
			dat++
		}
		if !lose() {
			d.Push(m, b, now, deliver)
		}
	}
	drain := func() {
		for m, b, ok := e.NextParity(); ok; m, b, ok = e.NextParity() {
			wire(m, b)
		}
	}
	buf := make([]byte, 1424)
	var seq, tickSeq, repSeq uint64
	var tickAt, repAt time.Duration
	tickRate, reports := 0.0, 0
	step := func(el time.Duration) {
		now = t0.Add(el)
		if e.Tick(now) {
			drain()
		}
		d.Tick(now)
		if el-tickAt >= 50*time.Millisecond {
			tickRate = float64(seq-tickSeq) / (el - tickAt).Seconds()
			tickSeq, tickAt = seq, el
		}
		if reports < earlyReportsSim && el >= time.Duration(reports+1)*250*time.Millisecond {
			rate := max(tickRate, float64(seq-repSeq)/(el-repAt).Seconds())
			repSeq, repAt = seq, el
			a.SetFill(rate * e.FlushTimeout().Seconds())
			k, r := a.Observe(d.TakeLossReport())
			_ = e.SetRatio(k, r)
			e.SetDepth(a.Depth())
			e.SetPartialParity(a.Partial())
			reports++
		}
	}
	var el time.Duration
	var firstSecond uint64
	for cwnd := 10; el < 3*span/2; cwnd *= 2 {
		n := min(cwnd, int(maxRate*rtt.Seconds()))
		gap := rtt / time.Duration((n+bunch-1)/bunch)
		for i := 0; i < n; i += bunch {
			for range min(bunch, n-i) {
				binary.BigEndian.PutUint64(buf, seq)
				if el < span {
					firstSecond = seq + 1
				}
				seq++
				m, _ := e.Add(buf, now)
				wire(m, buf)
				drain()
			}
			for end := el + gap; el < end; el += time.Millisecond {
				step(el)
			}
		}
	}
	for range 300 {
		el += time.Millisecond
		step(el)
	}
	for i := range firstSecond {
		if !got[i] {
			lost++
		}
	}
	return lost, float64(par) / float64(par+dat)
}

// earlyReportsSim is the shard's earlyReports: the reports that come
// 250 ms apart at a lane's start.
const earlyReportsSim = 4

// A CUBIC or Reno flow that loses a packet for good in its slow start
// leaves it with a small window, which grows back only slowly at a long
// round trip. Through 5% loss in bursts of 4, at most one slow start in
// forty loses one in its first second (1 of 80 seeds here): the start-up
// allowance (startupReports) lets the guess and the first choices spend
// up to one parity per data symbol where MaxOverhead cannot meet the
// target. Without it (16:6 x4, then choices such as 10:8 x4), 24 of the
// 80 lost packets, as one CUBIC flow start in four did through the bench's
// bridge.
func TestSlowStartThroughBursts(t *testing.T) {
	seeds := 80
	if raceEnabled || testing.Short() {
		seeds = 20 // the codec's arithmetic is slow under -race
	}
	bad := 0
	var share float64
	for seed := range uint64(seeds) {
		lost, par := simSlowStart(t, 0.05, 4, seed)
		share += par / float64(seeds)
		if lost > 0 {
			bad++
			t.Logf("seed %d: %d packets of the first second lost for good", seed, lost)
		}
	}
	t.Logf("%d of %d slow starts lost packets in their first second; parity %.1f%% of their datagrams", bad, seeds, 100*share)
	if bad > max(1, seeds/40) {
		t.Errorf("%d of %d slow starts through 5%% loss in bursts of 4 lost packets for good in their first second", bad, seeds)
	}
}
