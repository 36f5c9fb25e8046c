package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	if s := sizeString(32 << 20); s != "32M" {
		t.Errorf("sizeString(32 MiB) = %q, want 32M", s)
	}
	for in, want := range map[string]int{"0": 0, "4096": 4096, "4097": 4097, "64K": 64 << 10, "32M": 32 << 20, "1G": 1 << 30} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, err := parseSize(sizeString(got)); err != nil || back != got {
			t.Errorf("sizeString(%d) = %q reads back as %d, %v", got, sizeString(got), back, err)
		}
	}
	for _, in := range []string{"", "M", "-1", "1.5M", "32m", "3G", "1T"} {
		if n, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		}
	}
}

func TestTCPBufDefault(t *testing.T) {
	w := parseWAN(t, "-delay", "25ms")
	for _, c := range []struct {
		flag string
		wan  *wan
		want int
	}{{"", nil, 0}, {"", w, tcpBufWAN}, {"0", w, 0}, {"8M", nil, 8 << 20}} {
		if got, err := tcpBuf(c.flag, c.wan); err != nil || got != c.want {
			t.Errorf("tcpBuf(%q, wan %v) = %d, %v; want %d", c.flag, c.wan != nil, got, err, c.want)
		}
	}
}

func TestSelectTests(t *testing.T) {
	c := &config{CCs: []string{"cubic", "bbr"}, UDPLen: 1360, Rate: "100M"}
	all := testSpecs(c)
	got, err := selectTests(all, nil)
	if err != nil || len(got) != len(all) {
		t.Fatalf("no selection: %d of %d, %v", len(got), len(all), err)
	}
	got, err = selectTests(all, []string{"tcp1", "udp-100M"})
	var names []string
	for _, s := range got {
		names = append(names, s.name)
	}
	if err != nil || strings.Join(names, " ") != "tcp1-cubic tcp1-bbr udp-100M" {
		t.Errorf("tcp1,udp-100M selects %q, %v", names, err)
	}
	if _, err := selectTests(all, []string{"tcp8"}); err == nil || !strings.Contains(err.Error(), "tcp1-cubic") {
		t.Errorf("a selection of none: %v, want an error naming the tests", err)
	}
}

func TestHeaderTCPBufAndTests(t *testing.T) {
	c := &config{Rounds: 3, Duration: 8 * time.Second, Omit: time.Second, MTU: 1410, WGMTU: wgDefaultMTU, UDPLen: 1360, Pings: 200, YipFEC: "auto",
		TCPBuf: 32 << 20, Tests: []string{"tcp1", "udp-100M"}}
	h := header(c, testMeta(c))
	for _, want := range []string{
		"TCP buffers: autotuning up to 32M in both gateway namespaces",
		"Tests: only tcp1, udp-100M.\n",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
	c.TCPBuf, c.WAN = 0, parseWAN(t, "-delay", "25ms")
	if h := header(c, testMeta(c)); !strings.Contains(h, "TCP buffers: the host's ceilings (-tcp-buf 0)") {
		t.Errorf("a WAN run with the host's buffers does not say so:\n%s", h)
	}
}
