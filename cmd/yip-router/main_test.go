package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/buildinfo"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGenkeyPubkeyRoundTrip(t *testing.T) {
	code, priv, _ := runCLI(t, "", "genkey")
	if code != 0 {
		t.Fatalf("genkey exit %d", code)
	}
	k, err := crypto.ParsePrivateKey(priv)
	if err != nil {
		t.Fatalf("genkey output %q does not parse: %v", priv, err)
	}
	code, pub, stderr := runCLI(t, priv, "pubkey")
	if code != 0 {
		t.Fatalf("pubkey exit %d: %s", code, stderr)
	}
	if strings.TrimSpace(pub) != k.Public().String() {
		t.Fatalf("pubkey printed %q, want %q", pub, k.Public())
	}
}

// RFC 7748 §6.1's Alice key pair in WireGuard's base64 text form: checks
// the text form, clamping (the scalar is given unclamped) and derivation.
func TestPubkeyKnownAnswer(t *testing.T) {
	priv := "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo="
	want := "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	code, pub, stderr := runCLI(t, priv+"\n", "pubkey")
	if code != 0 || strings.TrimSpace(pub) != want {
		t.Fatalf("pubkey = %q (exit %d, %s), want %s", pub, code, stderr, want)
	}
}

func TestPubkeyRejectsBadInput(t *testing.T) {
	for _, in := range []string{"", "not base64!!\n", "AAAA\n", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"} {
		code, out, stderr := runCLI(t, in, "pubkey")
		if code == 0 || out != "" || !strings.Contains(stderr, "private key") {
			t.Errorf("pubkey(%q): exit %d out %q err %q; want failure naming the private key", in, code, out, stderr)
		}
	}
}

func TestGenpskAndUsage(t *testing.T) {
	code, psk, _ := runCLI(t, "", "genpsk")
	if _, err := crypto.ParsePresharedKey(psk); code != 0 || err != nil {
		t.Fatalf("genpsk: exit %d, %q: %v", code, psk, err)
	}
	if code, _, stderr := runCLI(t, "", "frobnicate"); code != 2 || !strings.Contains(stderr, "unknown command") {
		t.Fatalf("unknown command: exit %d, %q", code, stderr)
	}
	if code, out, _ := runCLI(t, "", "genkey", "--help"); code != 0 || !strings.Contains(out, "genkey") {
		t.Fatalf("genkey --help: exit %d, %q", code, out)
	}
}

// `version` and `--version` print the build, the wire version and the Go
// release on one line; extra arguments are refused.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		want := fmt.Sprintf("yip-router %s (wire version 2, %s)\n", buildinfo.Version(), runtime.Version())
		if out.String() != want {
			t.Fatalf("%v: %q, want %q", args, out.String(), want)
		}
	}
	if code := run([]string{"version", "x"}, nil, io.Discard, io.Discard); code != 2 {
		t.Fatalf("version with an argument: exit %d", code)
	}
}

// `CMD --help` prints the usage line and, for every command that takes
// flags, each flag with its help, to stdout with exit 0; nothing runs.
func TestHelpListsFlags(t *testing.T) {
	for _, c := range []struct {
		cmd   string
		flags []string
	}{
		{"up", []string{"-c, --config FILE", "-shards", "-log-level", "-log-format"}},
		{"show", []string{"-json", "-watch", "-interval", "-dump", "-socket"}},
		{"check", []string{"-c, --config FILE", "-shards"}},
		{"demo", []string{"-shards", "-fec"}},
		{"genkey", nil},
	} {
		code, out, errOut := runCLI(t, "", c.cmd, "--help")
		if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: yip-router "+c.cmd) {
			t.Fatalf("%s --help: exit %d, stdout %q, stderr %q", c.cmd, code, out, errOut)
		}
		for _, f := range c.flags {
			if !strings.Contains(out, f) {
				t.Errorf("%s --help does not list %s:\n%s", c.cmd, f, out)
			}
		}
		if (len(c.flags) > 0) != strings.Contains(out, "flags:") {
			t.Errorf("%s --help: flags section %v, want %v", c.cmd, strings.Contains(out, "flags:"), len(c.flags) > 0)
		}
	}
}

// A long flag with one dash, as Go's flag package read it before the
// commands moved to cobra, still works: it gets the second dash, and
// shorthands, flag values and everything after "--" stay as they are.
func TestSingleDash(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"up -c gw.conf -shards 2 -log-level=debug", "up -c gw.conf --shards 2 --log-level=debug"},
		{"up -name -shards -c gw.conf", "up --name -shards -c gw.conf"},
		{"up -cgw.conf --shards auto", "up -cgw.conf --shards auto"},
		{"show -json -i yip0 dump", "show --json -i yip0 dump"},
		{"show all -dump -- -json", "show all --dump -- -json"},
		{"show -interval 2s -watch", "show --interval 2s --watch"},
		{"genkey -help", "genkey --help"},
		{"-version", "--version"},
		{"frobnicate -json", "frobnicate -json"},
	} {
		got := strings.Join(singleDash(newRoot(), strings.Fields(c.args)), " ")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.args, got, c.want)
		}
	}
	// Through the command: check reads -shards as --shards.
	if code, _, errOut := runCLI(t, "", "check", "-c", "x.conf", "-shards", "0"); code != 2 || !strings.Contains(errOut, `--shards "0"`) {
		t.Errorf("check -shards 0: exit %d, %q", code, errOut)
	}
}

// The hidden completion command prints each shell's script, and the
// scripts' helper (__complete) offers the flags' and arguments' values.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "__start_yip-router",
		"zsh":  "#compdef yip-router",
		"fish": "complete -c yip-router",
	} {
		code, out, errOut := runCLI(t, "", "completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, %q not in the script (stderr %q)", shell, code, want, errOut)
		}
	}
	if _, out, _ := runCLI(t, "", "--help"); strings.Contains(out, "completion") {
		t.Errorf("--help lists the hidden completion command:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"up", "show", "check", "genkey", "demo"}},
		{[]string{"__complete", "show", ""}, []string{"all", "peers", "dump"}},
		{[]string{"__complete", "show", "all", ""}, []string{"transfer", "allowed-ips"}},
		{[]string{"__complete", "show", "--"}, []string{"--json", "--dump", "--interface"}},
		{[]string{"__complete", "up", "--log-level", ""}, []string{"debug", "error"}},
		{[]string{"__complete", "up", "--shards", ""}, []string{"auto"}},
		{[]string{"__complete", "demo", "--fec", ""}, []string{"off", "auto"}},
	} {
		code, out, _ := runCLI(t, "", c.args...)
		lines := strings.Split(out, "\n")
		for _, w := range c.want {
			if code != 0 || !slices.ContainsFunc(lines, func(l string) bool { return l == w || strings.HasPrefix(l, w+"\t") }) {
				t.Errorf("%q: exit %d, no %q in\n%s", c.args, code, w, out)
			}
		}
	}
}
