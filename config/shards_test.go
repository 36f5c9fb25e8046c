package config

import (
	"strings"
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

func TestParseShards(t *testing.T) {
	good := map[string]Shards{
		"auto":   {Auto: true},
		"AUTO":   {Auto: true},
		" Auto ": {Auto: true},
		"1":      {N: 1},
		"4":      {N: 4},
		"064":    {N: 64},
		"64":     {N: MaxShards},
	}
	for in, want := range good {
		got, err := ParseShards(in)
		if err != nil || got != want || !got.Valid() {
			t.Errorf("ParseShards(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParseShards(got.String()); err != nil || again != got {
			t.Errorf("String round trip of %+v (%q) gave %+v, %v", got, got.String(), again, err)
		}
	}
	for _, in := range []string{"", "0", "65", "-1", "+4", "4.0", "0x10", "all", "autox", "4 shards", "99999999999"} {
		_, err := ParseShards(in)
		if err == nil || !strings.Contains(err.Error(), "want auto or a number of shards 1..64") || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParseShards(%q) error %v, want one naming the value and 1..64", in, err)
		}
	}
	for n := range MaxShards + 2 {
		s := Shards{N: n}
		if s.Valid() != (n >= 1 && n <= MaxShards) {
			t.Errorf("%+v.Valid() = %v", s, s.Valid())
		}
	}
	if (Shards{}).Valid() || (Shards{Auto: true, N: 2}).Valid() || (Shards{}).String() != "0" {
		t.Error("the zero value, or auto with a number, is valid")
	}
	if got := (Shards{Auto: true}).String(); got != "auto" {
		t.Errorf("auto prints %q", got)
	}
	// A handshake offers one lane per shard.
	if MaxShards > crypto.MaxLanes {
		t.Errorf("MaxShards %d > crypto.MaxLanes %d", MaxShards, crypto.MaxLanes)
	}
}
