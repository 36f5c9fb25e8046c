package router

import (
	"net/netip"
	"slices"
	"testing"
)

func TestDiffPrefixes(t *testing.T) {
	p := netip.MustParsePrefix
	add, del := diffPrefixes([]netip.Prefix{p("10.0.0.0/8"), p("10.1.0.0/16")}, []netip.Prefix{p("10.1.0.0/16"), p("fd00::/8")})
	if !slices.Equal(add, []netip.Prefix{p("fd00::/8")}) || !slices.Equal(del, []netip.Prefix{p("10.0.0.0/8")}) {
		t.Fatalf("add %v del %v", add, del)
	}
}
