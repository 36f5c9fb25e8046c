package control

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Sessions and the timers that make and end them, in memory on a fake
// clock.

// symmetric is two cores that each have the other as Endpoint, so both may
// initiate; small is the one with the smaller public key.
func symmetric(t *testing.T) (small, large *memCore) {
	t.Helper()
	clock := testclock.New(epoch)
	a := newMemCore(t, "192.0.2.10:51820", 1, clock)
	b := newMemCore(t, "192.0.2.20:51820", 1, clock)
	for _, x := range [][2]*memCore{{a, b}, {b, a}} {
		if err := x[0].SetPeers([]config.Peer{{PublicKey: x[1].local.PublicKey(), Endpoint: x[1].addr,
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(x[1].addr.Addr(), 32)}}}); err != nil {
			t.Fatal(err)
		}
	}
	pa, pb := a.local.PublicKey(), b.local.PublicKey()
	if bytes.Compare(pa[:], pb[:]) < 0 {
		return a, b
	}
	return b, a
}

// sessionsAgree reports whether a's and b's current sessions are one
// session seen from both ends.
func sessionsAgree(t *testing.T, a, b *memCore) bool {
	t.Helper()
	pa, pb := a.peerOf(t), b.peerOf(t)
	var ok bool
	a.locked(func() {
		b.locked(func() {
			ok = pa.sess != nil && pb.sess != nil &&
				pa.sess.LocalIndex == pb.sess.RemoteIndex && pa.sess.RemoteIndex == pb.sess.LocalIndex
		})
	})
	return ok
}

// Both sides initiate at once: the side with the smaller public key keeps
// its initiation and ignores the other's; the larger answers and abandons
// its own. One session results, and the smaller side never answered.
func TestCrossingInitiationsTieBreak(t *testing.T) {
	small, large := symmetric(t)
	small.kick(t)
	large.kick(t)
	fromSmall, fromLarge := small.take(), large.take()
	if len(fromSmall) != 1 || len(fromLarge) != 1 {
		t.Fatalf("initiations: %d and %d", len(fromSmall), len(fromLarge))
	}
	small.deliver(fromLarge, large.addr, ConnGroup)
	large.deliver(fromSmall, small.addr, ConnGroup)
	if small.hs.answered.Load() != 0 || large.hs.answered.Load() != 1 {
		t.Fatalf("answered: smaller key %d, larger key %d", small.hs.answered.Load(), large.hs.answered.Load())
	}
	if n := large.npending.Load(); n != 0 {
		t.Fatalf("the larger side kept %d initiations after answering", n)
	}
	if out := small.take(); len(out) != 0 {
		t.Fatalf("the smaller side sent %d datagrams to the crossing initiation", len(out))
	}
	small.deliver(large.take(), large.addr, ConnLane)
	if small.hs.completed.Load() != 1 || !sessionsAgree(t, small, large) {
		t.Fatalf("completed %d; sessions agree %v", small.hs.completed.Load(), sessionsAgree(t, small, large))
	}
}

// The smaller side keeps its initiation only while it can still be
// answered: past HandshakeTimeout it answers the other's.
func TestCrossingAfterTimeoutAnswers(t *testing.T) {
	small, large := symmetric(t)
	small.kick(t)
	small.take() // lost
	small.clock.Advance(HandshakeTimeout + time.Millisecond)
	large.kick(t)
	small.deliver(large.take(), large.addr, ConnGroup)
	if small.hs.answered.Load() != 1 {
		t.Fatal("the smaller side ignored an initiation while its own had timed out")
	}
	large.deliver(small.take(), small.addr, ConnLane)
	if !sessionsAgree(t, small, large) {
		t.Fatal("no agreed session")
	}
}

// Retries back off 1, 2, 4, 8, 15, 15 s with ±10% jitter, on the timer's
// 250 ms grid; traffic that waited 90 s stops asking.
func TestRetryBackoffJitterAndGiveUp(t *testing.T) {
	m := newMemCore(t, "192.0.2.2:40000", 1, nil)
	const peers = 6
	var pcs []config.Peer
	for i := range peers {
		k, _ := crypto.GeneratePrivateKey()
		pcs = append(pcs, config.Peer{PublicKey: k.Public(),
			Endpoint:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(i + 1)}), 51820),
			AllowedIPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 7, 0, byte(i + 1)}), 32)}})
	}
	if err := m.SetPeers(pcs); err != nil {
		t.Fatal(err)
	}
	var ids []shard.PeerID
	m.locked(func() {
		for _, p := range m.peers {
			ids = append(ids, p.id)
		}
	})
	for _, id := range ids {
		m.NoSession(0, id)
	}
	start := m.clock.Now()
	sends := map[netip.AddrPort][]time.Duration{}
	for now := start; now.Sub(start) < 150*time.Second; now = m.clock.Advance(TimerPeriod) {
		m.Tick(now)
		for _, d := range m.take() {
			sends[d.to] = append(sends[d.to], now.Sub(start))
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second}
	gaps := map[time.Duration]bool{}
	for to, at := range sends {
		if at[0] != 0 {
			t.Fatalf("%s: first initiation at %s, not at once", to, at[0])
		}
		for i := 1; i < len(at); i++ {
			gap, b := at[i]-at[i-1], want[min(i-1, len(want)-1)]
			if gap < b-b/10 || gap > b+b/10+TimerPeriod {
				t.Fatalf("%s: retry %d after %s, want %s ±10%%", to, i, gap, b)
			}
			if i >= 4 {
				gaps[gap] = true
			}
		}
		last := at[len(at)-1]
		if last > wantTimeout+15*time.Second+15*time.Second/10+TimerPeriod || last < wantTimeout-15*time.Second {
			t.Fatalf("%s: last initiation at %s; traffic stops waiting after %s", to, last, wantTimeout)
		}
	}
	if len(sends) != peers {
		t.Fatalf("initiations to %d of %d peers", len(sends), peers)
	}
	if len(gaps) < 3 {
		t.Fatalf("long retries of %d peers took only the gaps %v: no jitter", peers, gaps)
	}
	total := 0
	for _, at := range sends {
		total += len(at)
	}
	if got := m.Counts().Initiated; got != uint64(total) {
		t.Fatalf("initiated counter %d, %d sent", got, total)
	}
}

// The initiator rekeys between rekeyAfter and 1.1 × rekeyAfter; the new
// session replaces the old on both sides without removing the lanes, so
// the shards keep the old keys for datagrams still in flight.
func TestRekeyKeepsLanes(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	old := ini.peerOf(t).sess
	start := ini.clock.Now()
	var rekeyAt time.Duration
	for now := start; now.Sub(start) < 2*DefaultRekeyAfter; now = ini.clock.Advance(TimerPeriod) {
		ini.Tick(now)
		resp.Tick(now)
		if out := ini.take(); len(out) > 0 {
			rekeyAt = now.Sub(start)
			resp.deliver(out, ini.addr, ConnGroup)
			ini.deliver(resp.take(), resp.addr, ConnLane)
			break
		}
		if out := resp.take(); len(out) > 0 {
			t.Fatalf("the responder initiated at %s while the initiator was due first", now.Sub(start))
		}
	}
	if rekeyAt < DefaultRekeyAfter || rekeyAt > DefaultRekeyAfter+DefaultRekeyAfter/rekeyJitterDiv+TimerPeriod {
		t.Fatalf("rekey after %s, want %s..+10%%", rekeyAt, DefaultRekeyAfter)
	}
	if ini.peerOf(t).sess == old || !sessionsAgree(t, ini, resp) {
		t.Fatal("the rekey did not replace the session on both sides")
	}
	for _, m := range []*memCore{ini, resp} {
		if n := m.plane.removed[m.peerOf(t).id]; n != 0 {
			t.Fatalf("lanes removed %d times during a rekey", n)
		}
		if m.plane.installs != 2 {
			t.Fatalf("lanes installed %d times, want 2 (one per session)", m.plane.installs)
		}
	}
	if c := ini.Counts(); c.Initiated != 2 || c.Completed != 2 {
		t.Fatalf("initiator counts %+v", c)
	}
}

// A responder whose initiator went quiet and that has traffic waiting
// initiates itself at 1.25 × rekeyAfter; with nothing waiting it lets the
// session expire at 3 × rekeyAfter, removing its lanes.
func TestResponderRekeyAndExpiry(t *testing.T) {
	for _, waiting := range []bool{true, false} {
		ini, resp := memPair(t, "198.51.100.7:40000")
		handshake(t, ini, resp)
		if waiting {
			resp.NoSession(0, resp.peerOf(t).id)
		}
		start := resp.clock.Now()
		var initAt, expiredAt time.Duration
		for now := start; now.Sub(start) < 4*DefaultRekeyAfter; now = resp.clock.Advance(TimerPeriod) {
			resp.Tick(now)
			if out := resp.take(); len(out) > 0 && initAt == 0 {
				initAt = now.Sub(start)
				if out[0].to != ini.addr {
					t.Fatalf("responder initiated to %s, the initiator is at %s", out[0].to, ini.addr)
				}
			}
			if resp.peerOf(t).sess == nil && expiredAt == 0 {
				expiredAt = now.Sub(start)
			}
		}
		due := DefaultRekeyAfter + DefaultRekeyAfter/responderRekeyDiv
		switch {
		case waiting && (initAt < due || initAt > due+DefaultRekeyAfter/rekeyJitterDiv+TimerPeriod):
			t.Fatalf("waiting responder initiated at %s, want %s..+10%%", initAt, due)
		case !waiting && initAt != 0:
			t.Fatalf("idle responder initiated at %s", initAt)
		}
		reject := rejectAfterFactor * DefaultRekeyAfter
		if expiredAt <= reject || expiredAt > reject+TimerPeriod {
			t.Fatalf("session expired at %s, want just after %s", expiredAt, reject)
		}
		if resp.plane.removed[resp.peerOf(t).id] != 1 || len(resp.plane.lanes) != 0 {
			t.Fatalf("expired session: removed %d, lanes left %d", resp.plane.removed[resp.peerOf(t).id], len(resp.plane.lanes))
		}
	}
}

// A peer that restarted (same key, new state) is answered at once and its
// new session replaces the old one; the side that kept sending into the
// lost session learns of it from the lanes (PeerSilent) and handshakes,
// unless a handshake is under way or backing off.
func TestRestartedPeer(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	handshake(t, ini, resp)
	ini.clock.Advance(time.Second)

	// The initiator restarts: a new core with the same key.
	ini2 := restarted(t, ini, resp)
	handshake(t, ini2, resp)
	if resp.hs.answered.Load() != 2 || !sessionsAgree(t, ini2, resp) {
		t.Fatal("the restarted peer's handshake did not replace the session")
	}

	// The old initiator's lanes go unanswered: it handshakes.
	p := ini.peerOf(t)
	silent := func() int {
		ini.PeerSilent(0, p.id, false)
		ini.Step()
		return len(ini.take())
	}
	if n := silent(); n != 1 {
		t.Fatalf("silent peer: %d initiations", n)
	}
	if n := silent(); n != 0 {
		t.Fatalf("silent peer with a handshake under way: %d initiations", n)
	}
	// Each retry times out (nobody answers) before the next: attempts 2,
	// 3 and 4 (backoff 2, 4 and 8 s).
	for attempt := 2; attempt <= 4; attempt++ {
		ini.clock.Advance(HandshakeTimeout + time.Millisecond)
		if n := silent(); n != 1 {
			t.Fatalf("attempt %d: %d initiations", attempt, n)
		}
	}
	ini.clock.Advance(HandshakeTimeout + time.Millisecond)
	if n := silent(); n != 0 {
		t.Fatalf("silent peer while backing off: %d initiations", n)
	}
	var next time.Time
	ini.locked(func() { next = p.nextTry })
	ini.clock.Advance(next.Sub(ini.clock.Now()))
	if n := silent(); n != 1 {
		t.Fatalf("silent peer after the backoff: %d initiations", n)
	}
	// An event for a peer that is gone does nothing.
	ini.PeerSilent(0, p.id+100, false)
	ini.Step()
	if n := len(ini.take()); n != 0 {
		t.Fatalf("%d initiations for an unknown peer", n)
	}
}

// PersistentKeepalive keeps a session up without traffic: the core
// initiates by itself; a peer with neither keepalive nor traffic waits.
func TestKeepaliveStartsSessionsTrafficOrNot(t *testing.T) {
	m := newMemCore(t, "192.0.2.2:40000", 1, nil)
	k1, _ := crypto.GeneratePrivateKey()
	k2, _ := crypto.GeneratePrivateKey()
	if err := m.SetPeers([]config.Peer{
		{PublicKey: k1.Public(), Endpoint: netip.MustParseAddrPort("198.51.100.1:51820"), PersistentKeepalive: 25 * time.Second},
		{PublicKey: k2.Public(), Endpoint: netip.MustParseAddrPort("198.51.100.2:51820")},
	}); err != nil {
		t.Fatal(err)
	}
	m.Tick(m.clock.Now())
	out := m.take()
	if len(out) != 1 || out[0].to != netip.MustParseAddrPort("198.51.100.1:51820") {
		t.Fatalf("initiations %v: want one, to the keepalive peer", out)
	}
	if out[0].conn != ConnLane {
		t.Fatal("initiation not from a lane socket")
	}
}

// An initiation to a peer whose lanes said it reads long handshakes may be
// as long as its data; an unanswered one is retried within the length
// every router takes, in case the peer now runs one that takes no more.
func TestRetryDropsLongHandshakes(t *testing.T) {
	ini, _ := memPair(t, "198.51.100.7:40000")
	p := ini.peerOf(t)
	ini.locked(func() {
		for range 8 {
			p.lens.Add(1400)
		}
		p.lens.SetLong(true)
	})
	ini.NoSession(0, p.id)
	start := ini.clock.Now()
	var lens []int
	for now := start; now.Sub(start) < 5*time.Second && len(lens) < 2; now = ini.clock.Advance(TimerPeriod) {
		ini.Tick(now)
		for _, d := range ini.take() {
			lens = append(lens, len(d.b))
		}
	}
	if len(lens) != 2 || lens[0] != 1400 || lens[1] > 1024 {
		t.Fatalf("initiation lengths %v: want 1400, then a retry of at most 1024 bytes", lens)
	}
	if p.lens.LongHandshakes() {
		t.Fatal("the retry left the peer marked as reading long handshakes")
	}
}

// A peer whose datagrams arrive framed by wire version 1
// (shard.Config.Silent with oldFraming) is named in one WARN that says
// "wire version", however often its lanes report it; a merely silent
// peer is not.
func TestWireMismatchWarnsOnce(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	core, logs := observer.New(zap.WarnLevel)
	ini.Core.log = zap.New(core)
	handshake(t, ini, resp)
	p := ini.peerOf(t)
	ini.PeerSilent(0, p.id, false)
	ini.Step()
	if n := logs.FilterMessageSnippet("wire version").Len(); n != 0 {
		t.Fatalf("%d mismatch warnings for a silent peer", n)
	}
	for range 3 {
		ini.PeerSilent(0, p.id, true)
		ini.Step()
		ini.clock.Advance(HandshakeTimeout + time.Millisecond)
	}
	warns := logs.FilterMessageSnippet("wire version")
	if warns.Len() != 1 {
		t.Fatalf("%d mismatch warnings, want 1", warns.Len())
	}
	if f := warns.All()[0].ContextMap(); f["peer"] != p.cfg.PublicKey.String() || f["wire_version"] != int64(crypto.WireVersion) {
		t.Fatalf("warning fields %v", f)
	}
}

// A peer that does not answer gets one WARN once failWarnAttempts
// initiations went unanswered, however long it stays silent; its next
// completed handshake logs one INFO that handshakes work again. A new
// session is logged at INFO, a rekey of a working one at DEBUG only.
func TestHandshakeFailuresLoggedOnce(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	core, logs := observer.New(zap.DebugLevel)
	ini.Core.log = zap.New(core)
	start := ini.clock.Now()
	for ini.clock.Now().Sub(start) < 60*time.Second {
		ini.kick(t)
		ini.take() // lost on the way
		ini.clock.Advance(TimerPeriod)
	}
	warns := logs.FilterMessageSnippet("keep failing")
	if warns.Len() != 1 || warns.All()[0].Level != zap.WarnLevel {
		t.Fatalf("%d failure warnings in 60 s of silence, want 1", warns.Len())
	}
	if f := warns.All()[0].ContextMap(); f["peer"] != ini.peerOf(t).cfg.PublicKey.String() || f["attempts"] != int64(failWarnAttempts) {
		t.Fatalf("warning fields %v", f)
	}
	handshake(t, ini, resp)
	if n := logs.FilterMessageSnippet("work again").Len(); n != 1 {
		t.Fatalf("%d recovery messages, want 1", n)
	}
	if n := logs.FilterMessage("handshake completed").FilterLevelExact(zap.InfoLevel).Len(); n != 1 {
		t.Fatalf("first session: %d INFO completions, want 1", n)
	}
	// A rekey of the working session: DEBUG.
	ini.clock.Advance(DefaultRekeyAfter + DefaultRekeyAfter/rekeyJitterDiv + time.Second)
	ini.Tick(ini.clock.Now())
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if n := logs.FilterMessage("handshake completed").Len(); n != 2 {
		t.Fatalf("%d completions after the rekey, want 2", n)
	}
	if n := logs.FilterMessage("handshake completed").FilterLevelExact(zap.InfoLevel).Len(); n != 1 {
		t.Fatalf("the rekey logged at INFO (%d INFO completions)", n)
	}
	if n := logs.FilterMessageSnippet("keep failing").Len() + logs.FilterMessageSnippet("work again").Len(); n != 2 {
		t.Fatalf("%d failure/recovery messages after the rekey, want 2", n)
	}
}
