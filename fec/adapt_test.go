package fec

import (
	"math"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	good := map[string]Mode{
		"off":    {Kind: ModeOff},
		" Auto ": {Kind: ModeAuto},
		"16:4":   {Kind: ModeFixed, K: 16, R: 4},
		"1:0":    {Kind: ModeFixed, K: 1, R: 0},
		"64:32":  {Kind: ModeFixed, K: 64, R: 32},
	}
	for in, want := range good {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, _ := ParseMode(got.String()); again != got {
			t.Errorf("String round trip of %+v gave %+v", got, again)
		}
	}
	bad := map[string]string{
		"":      "want off, auto or K:R",
		"on":    "want off, auto or K:R",
		"16":    "want off, auto or K:R",
		"a:b":   "decimal integers",
		"16:":   "decimal integers",
		"0:1":   "K must be 1..64",
		"65:1":  "K must be 1..64",
		"8:-1":  "R must be 0..32",
		"8:33":  "R must be 0..32",
		"8:2:1": "decimal integers",
	}
	for in, msg := range bad {
		if _, err := ParseMode(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseMode(%q) error %v, want one mentioning %q", in, err, msg)
		}
	}
}

func TestResidualLoss(t *testing.T) {
	// Hand-computed: 1:1 fails only if both are lost, losing the one data
	// symbol: residual = p²·2/2.
	if got := ResidualLoss(1, 1, 0.1); math.Abs(got-0.01) > 1e-12 {
		t.Fatalf("ResidualLoss(1,1,0.1) = %v, want 0.01", got)
	}
	// With R=0 the residual is the wire loss itself.
	if got := ResidualLoss(8, 0, 0.05); math.Abs(got-0.05) > 1e-12 {
		t.Fatalf("ResidualLoss(8,0,0.05) = %v, want 0.05", got)
	}
	if ResidualLoss(16, 4, 0.05) >= ResidualLoss(16, 3, 0.05) {
		t.Fatal("more parity must not predict more loss")
	}
}

func TestAdapterRule(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rep := func(loss float64) LossReport {
		return LossReport{Expected: 10000, Received: uint32(10000 * (1 - loss))}
	}
	if _, r := a.Observe(rep(0)); r != 1 {
		t.Fatalf("clean path: R=%d, want floor 1", r)
	}
	if _, r := a.Observe(rep(0.05)); r < 4 {
		t.Fatalf("5%% loss at K=16: R=%d, want ≥4", r)
	}
	if _, r := a.Observe(rep(0.5)); r != 8 {
		t.Fatalf("50%% loss: R=%d, want ceiling 8", r)
	}
	// Loss gone: R steps down one per report, reaching the floor.
	prev := 8
	for range 20 {
		_, r := a.Observe(rep(0))
		if r < prev-1 {
			t.Fatalf("R dropped from %d to %d in one report", prev, r)
		}
		prev = r
	}
	if prev != 1 {
		t.Fatalf("R=%d after a long clean stretch, want 1", prev)
	}
	// Tiny reports are merged, not acted on.
	if _, r := a.Observe(LossReport{Expected: 3, Received: 1}); r != 1 {
		t.Fatalf("3-symbol report moved R to %d", r)
	}
	fixed, _ := NewAdapter(Mode{Kind: ModeFixed, K: 8, R: 2}, AdaptConfig{})
	if k, r := fixed.Observe(rep(0.5)); k != 8 || r != 2 {
		t.Fatalf("fixed mode adapted to %d:%d", k, r)
	}
	off, _ := NewAdapter(Mode{Kind: ModeOff}, AdaptConfig{})
	if _, r := off.Ratio(); r != 0 {
		t.Fatalf("off mode R=%d", r)
	}
	if _, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{MinR: 3, MaxR: 2}); err == nil {
		t.Fatal("floor above ceiling accepted")
	}
}

func TestLossReportWire(t *testing.T) {
	r := LossReport{Expected: 1000, Received: 950, Unrecovered: 3}
	b, _ := r.AppendBinary(nil)
	if len(b) != LossReportLen {
		t.Fatalf("encoded %d bytes", len(b))
	}
	got, err := ParseLossReport(b)
	if err != nil || got != r {
		t.Fatalf("round trip %+v %v", got, err)
	}
	if math.Abs(r.Loss()-0.05) > 1e-12 {
		t.Fatalf("Loss() = %v", r.Loss())
	}
	for _, bad := range []LossReport{{Expected: 1, Received: 2}, {Expected: 10, Received: 9, Unrecovered: 2}} {
		b, _ := bad.AppendBinary(nil)
		if _, err := ParseLossReport(b); err == nil {
			t.Errorf("accepted impossible %+v", bad)
		}
	}
	if _, err := ParseLossReport(b[:11]); err == nil {
		t.Error("accepted short report")
	}
}

// TestDecoderLossReport: the decoder's counts match the loss applied.
func TestDecoderLossReport(t *testing.T) {
	wire := precomputeWire(t, 8, 2, 100, 100, 5) // 1 of 10 lost per group
	d := NewDecoder(DecoderConfig{MaxGroups: 8})
	for _, w := range wire {
		d.Push(w.m, w.b, t0, func([]byte) {})
	}
	rep := d.TakeLossReport()
	// Groups still in the window are not reported yet.
	if rep.Expected < 900 || rep.Expected > 1000 || math.Abs(rep.Loss()-0.1) > 1e-9 || rep.Unrecovered != 0 {
		t.Fatalf("report %+v loss %v, want 10%% of ≥90 groups, none unrecovered", rep, rep.Loss())
	}
	if again := d.TakeLossReport(); again != (LossReport{}) {
		t.Fatalf("report not reset: %+v", again)
	}
}
