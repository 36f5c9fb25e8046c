package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
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
		{"up", []string{"-c string", "-shards", "-log-level", "-log-format"}},
		{"show", []string{"-json", "-watch", "-interval", "-dump", "-socket"}},
		{"check", []string{"-c string", "-shards"}},
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
