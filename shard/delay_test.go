package shard

// The round trip the loss reports measure (delay.go): the echo
// arithmetic, what it refuses, and the exchange between two lanes.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A report crosses one way, is held, and its echo comes back: the sample
// is the two crossings without the hold, also across the clock's wrap.
func TestDelayEchoSample(t *testing.T) {
	for name, t0 := range map[string]time.Time{
		"start": stampEpoch.Add(time.Second),
		"wrap":  stampEpoch.Add(time.Duration(1<<32-10_000) * time.Microsecond), // 10 ms before the wrap
	} {
		var a, b pathDelay
		fromA := a.appendEcho(nil, t0)
		if len(fromA) != delayEchoLen {
			t.Fatalf("%s: %d bytes, want %d", name, len(fromA), delayEchoLen)
		}
		b.readEcho(fromA, t0.Add(30*time.Millisecond)) // no echo in it: no sample
		if b.n != 0 || b.peerAt.IsZero() {
			t.Fatalf("%s: b took a sample (%d) or missed a's stamp", name, b.n)
		}
		fromB := b.appendEcho(nil, t0.Add(530*time.Millisecond))
		a.readEcho(fromB, t0.Add(560*time.Millisecond))
		if a.n != 1 || a.last != 60*time.Millisecond {
			t.Fatalf("%s: a's sample %s (%d samples), want 60ms", name, a.last, a.n)
		}
	}
}

// Padding (zeros), a held time longer than the echo's age, a sample past
// maxDelaySample and a short extension are no samples.
func TestDelayEchoRefused(t *testing.T) {
	now := stampEpoch.Add(time.Minute)
	var d pathDelay
	d.readEcho(make([]byte, 40), now)
	d.readEcho([]byte{echoMark, 1, 2, 3}, now)
	if !d.peerAt.IsZero() || d.n != 0 {
		t.Fatalf("padding or a short extension read as an echo: %+v", d)
	}
	var peer pathDelay
	peer.peerStamp, peer.peerAt = stamp(now.Add(-time.Second)), now.Add(-100*time.Millisecond)
	ext := peer.appendEcho(nil, now)
	d.readEcho(ext, now.Add(-time.Second+time.Millisecond)) // held 100 ms, echoed 1 ms ago
	peer.peerStamp = stamp(now.Add(-time.Hour / 2))
	d.readEcho(peer.appendEcho(nil, now), now) // 30 min old
	if d.n != 0 {
		t.Fatalf("an impossible sample was taken: %s", d.last)
	}
	if c := d.carried(); !c.peerAt.IsZero() || c.peerStamp != d.peerStamp {
		t.Fatalf("carried keeps the peer's stamp time: %+v", c)
	}
}

func TestDelayQueued(t *testing.T) {
	now := stampEpoch.Add(time.Hour)
	var d pathDelay
	add := func(rtt time.Duration) {
		now = now.Add(time.Second)
		d.sample(rtt, now, now.Add(-rtt))
	}
	queued := func() bool { st := d.state(now, true); return st == fec.PathQueued || st == fec.PathDrained }
	add(60 * time.Millisecond)
	if st := d.state(now, true); st != fec.PathUnknown {
		t.Fatalf("one sample and no handshake: %v", st)
	}
	for _, c := range []struct {
		rtt    time.Duration
		queued bool
	}{{60 * time.Millisecond, false}, {85 * time.Millisecond, false}, {95 * time.Millisecond, true},
		// The report after a queue overflowed: the queue has drained,
		// but the sample before saw it, and the loss came between
		// (drained, which the adapter counts as congestion too).
		{60 * time.Millisecond, true},
		{60 * time.Millisecond, false}} {
		add(c.rtt)
		if got := queued(); got != c.queued {
			t.Fatalf("sample %s over least %s: queued %v", c.rtt, d.least(), got)
		}
	}
	if st := d.state(now, false); st != fec.PathUnknown {
		t.Fatalf("a peer that does not echo: %v", st)
	}
	add(95 * time.Millisecond)
	if st := d.state(now.Add(sampleStale+time.Millisecond), true); st != fec.PathUnknown {
		t.Fatalf("a stale sample still says %v", st)
	}
	// A sample before the latest counts only while recent: one from
	// before a silence says nothing of the loss counted now.
	add(60 * time.Millisecond)
	if st := d.state(now, true); st != fec.PathDrained {
		t.Fatalf("the sample before, a second earlier, found a queue that the latest does not: %v", st)
	}
	now = now.Add(2 * sampleStale)
	add(60 * time.Millisecond)
	add(60 * time.Millisecond)
	if queued() {
		t.Fatal("a queued sample from before a silence still counts")
	}
	// queueMin on a LAN: 1.5 ms over 0.2 ms is jitter, 3 ms a queue.
	d = pathDelay{}
	add(200 * time.Microsecond)
	add(1500 * time.Microsecond)
	if queued() {
		t.Fatal("1.3 ms over a LAN's least taken as a queue")
	}
	add(3 * time.Millisecond)
	if !queued() {
		t.Fatal("2.8 ms over a LAN's least not taken as a queue")
	}
	// The least ages out after delaySamples samples: a new path.
	for range delaySamples {
		add(150 * time.Millisecond)
	}
	if d.least() != 150*time.Millisecond || queued() {
		t.Fatalf("least %s after a path change", d.least())
	}
	// A queue that stood from the first sample on: the handshake's
	// round trip, taken on the idle path, shows it; a later, slower
	// handshake does not replace it until hsKeep has passed.
	d.noteHandshake(60*time.Millisecond, now)
	d.noteHandshake(90*time.Millisecond, now.Add(time.Minute)) // a rekey's, under load
	if !queued() || d.hs != 60*time.Millisecond {
		t.Fatalf("150 ms against a 60 ms handshake not taken as a queue (least handshake %s)", d.hs)
	}
	d.noteHandshake(140*time.Millisecond, now.Add(hsKeep+time.Second)) // the route grew
	if d.hs != 140*time.Millisecond {
		t.Fatalf("a handshake older than hsKeep still the least: %s", d.hs)
	}
	if c := d.carried(); c.hs != d.hs || c.n != d.n || !c.peerAt.IsZero() {
		t.Fatalf("carried: least handshake %s, %d samples, peer stamp at %v", c.hs, c.n, c.peerAt)
	}
	one := pathDelay{}
	one.ring[0], one.n, one.last, one.lastAt = 150*time.Millisecond, 1, 150*time.Millisecond, now
	if one.noteHandshake(60*time.Millisecond, now); one.state(now, true) != fec.PathQueued {
		t.Fatal("one sample against a handshake's round trip: not queued")
	}
}

// echoPair is two sides with one auto-FEC lane each, the initiator's
// handshake round trip rtt, each knowing the other's features (as after
// the hellos).
func echoPair(t *testing.T, rtt time.Duration) (a, b *side, la, lb *lane) {
	t.Helper()
	a, b = newSide(t, 1, routesA), newSide(t, 1, routesB)
	installAuto(t, a, b, rtt)
	la, lb = a.shards[0].table.lanes[addrB], b.shards[0].table.lanes[addrA]
	la.peerFeatures, lb.peerFeatures = Features, Features
	return a, b, la, lb
}

// Two lanes that announce FeatureDelayEcho measure their round trip from
// each other's loss reports, and the adapter hears when it stands above
// the least: a queue.
func TestDelayEchoBetweenLanes(t *testing.T) {
	a, b, la, lb := echoPair(t, 50*time.Millisecond)
	sa, sb := a.shards[0], b.shards[0]
	// oneWay advances both clocks by the path's one-way delay, then
	// delivers what from sent.
	oneWay := func(from, to *side, d time.Duration) {
		sa.now, sb.now = sa.now.Add(d), sb.now.Add(d)
		deliverAll(t, from, to, nil)
	}
	exchange := func(d time.Duration) {
		for i := range 300 {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, i))
			inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 80, i))
		}
		sa.flushAll()
		sb.flushAll()
		oneWay(a, b, 0)
		oneWay(b, a, 0)
		// Reports fall due on both; A's crosses, B holds it until its
		// own is due, which crosses back.
		sa.now, sb.now = sa.now.Add(time.Second), sb.now.Add(time.Second)
		sa.tick()
		oneWay(a, b, d/2)
		sb.now = sb.now.Add(300 * time.Millisecond)
		sa.now = sa.now.Add(300 * time.Millisecond)
		sb.tick()
		oneWay(b, a, d/2)
	}
	for range 3 {
		exchange(50 * time.Millisecond)
	}
	if st := la.delay.state(sa.now, true); la.delay.n == 0 || la.delay.last != 50*time.Millisecond || st != fec.PathClear {
		t.Fatalf("A's samples: %d, last %s, %v; want 50ms, clear", la.delay.n, la.delay.last, st)
	}
	exchange(120 * time.Millisecond)
	if st := la.delay.state(sa.now, true); la.delay.last != 120*time.Millisecond || st != fec.PathQueued {
		t.Fatalf("A's last sample %s, %v; want 120ms, queued", la.delay.last, st)
	}
	// A lane whose peer does not announce the echo sends reports
	// without it, and reads none.
	lb.peerFeatures = FeatureLossRuns | FeaturePadding
	n := la.delay.n
	exchange(50 * time.Millisecond)
	if la.delay.n != n {
		t.Fatalf("A took a sample from a peer it did not send stamps to")
	}
	// A peer announcing the echo without padding gets no echo (its reads
	// want exact lengths), and its echoes are not read either.
	lb.peerFeatures, la.peerFeatures = Features, FeatureDelayEcho|FeatureLossRuns
	exchange(50 * time.Millisecond)
	if la.delay.n != n || !lb.delay.peerAt.IsZero() && lb.delay.peerAt.After(sb.now.Add(-time.Second)) {
		t.Fatalf("the echo went to or came from a peer without FeaturePadding")
	}
}

// The delay a rekey carries is the same path's; a new address, or a roam,
// starts it anew, and a responder's keepalives, which repeat the
// initiator's round trip after a roam too, note it only when it changes.
func TestDelayAcrossRekeyAndRoam(t *testing.T) {
	addrA2, addrB2 := netip.MustParseAddrPort("198.51.100.1:40000"), netip.MustParseAddrPort("198.51.100.2:51820")
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sa, sb := a.shards[0], b.shards[0]
	installAuto(t, a, b, 50*time.Millisecond)
	la := sa.table.lanes[addrB]
	if la.delay.hs != 50*time.Millisecond {
		t.Fatalf("the initiator's handshake round trip not noted: %s", la.delay.hs)
	}
	la.delay.ring[0], la.delay.n, la.delay.last = 70*time.Millisecond, 1, 70*time.Millisecond
	installAuto(t, a, b, 80*time.Millisecond) // a rekey, same address
	la = sa.table.lanes[addrB]
	if la.delay.n != 1 || la.delay.hs != 50*time.Millisecond {
		t.Fatalf("the rekey did not carry the path's delay: %d samples, least handshake %s", la.delay.n, la.delay.hs)
	}
	sa.setRemote(la, addrB2, true)
	if la.delay.n != 0 || la.delay.hs != 0 {
		t.Fatalf("a roam kept the old path's delay: %+v", la.delay)
	}
	// The responder: its keepalive from the initiator notes 50 ms once;
	// after a roam the same value again is not a new handshake.
	lb := sb.table.lanes[addrA]
	if !sa.SendKeepalive(2, 0) {
		t.Fatal("no keepalive")
	}
	deliverAll(t, a, b, nil)
	if lb.delay.hs != 80*time.Millisecond {
		t.Fatalf("responder's least handshake %s after the initiator's hello, want 80ms", lb.delay.hs)
	}
	sb.setRemote(lb, addrA2, true)
	sa.now = sa.now.Add(30 * time.Second)
	if !sa.SendKeepalive(2, 0) {
		t.Fatal("no keepalive")
	}
	deliverAll(t, a, b, nil)
	if lb.delay.hs != 0 {
		t.Fatalf("the old path's round trip came back after a roam: %s", lb.delay.hs)
	}
}

// With data one way only (the peer's return traffic on another lane), the
// receiving lane answers each report with an empty, stamped one, so the
// sender still measures its round trip; once the data stops, the lanes
// stop reporting instead of trading empty reports.
func TestDelayEchoOneWay(t *testing.T) {
	a, b, la, lb := echoPair(t, 40*time.Millisecond)
	sa, sb := a.shards[0], b.shards[0]
	step := func(d time.Duration) {
		sa.now, sb.now = sa.now.Add(d), sb.now.Add(d)
		sa.tick()
		sb.tick()
		deliverAll(t, a, b, nil)
		deliverAll(t, b, a, nil)
	}
	for round := range 6 {
		for i := range 300 {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, round*300+i))
		}
		for range 10 {
			step(100 * time.Millisecond)
		}
	}
	if la.delay.n == 0 {
		t.Fatal("A sent data for 6 s and measured no round trip: B never stamped a report")
	}
	for range 30 {
		step(100 * time.Millisecond)
	}
	ra, rb := la.reportsSent, lb.reportsSent
	for range 100 {
		step(100 * time.Millisecond)
	}
	if la.reportsSent != ra || lb.reportsSent != rb {
		t.Fatalf("idle lanes kept trading loss reports: A %d, B %d in 10 s", la.reportsSent-ra, lb.reportsSent-rb)
	}
}
