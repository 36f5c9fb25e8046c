// Tests of key files: the readKey step, Load with real files, and
// ExposedSecretFiles.

package config

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	priv, privText, _ := testKey(t, 1)
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys", "a.key"), []byte(privText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.key"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(testText(t, lines...)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Relative to the config file's directory, not the current one.
	p := write("gw.conf", "[Interface]", "PrivateKeyFile = keys/a.key")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != p || c.Interface.PrivateKey != priv {
		t.Errorf("Path %q, key %v", c.Path, c.Interface.PrivateKey)
	}
	// Through Parse an absolute path works.
	if _, err := Parse("x.conf", strings.NewReader("[Interface]\nPrivateKeyFile = "+filepath.Join(dir, "keys/a.key"))); err != nil {
		t.Error(err)
	}

	p = write("own.conf", "[Interface]", "PrivateKeyFile = keys/a.key", "[Peer]", "PublicKey = {OWNPUB}")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":4: [Peer] PublicKey: |is this interface's own public key (from PrivateKeyFile at line 2)"})

	p = write("bad.conf", "[Interface]", "PrivateKeyFile = bad.key")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |" + strconv.Quote(filepath.Join(dir, "bad.key")) + ": private key must be 44 base64 characters"})

	p = write("missing.conf", "[Interface]", "PrivateKeyFile = nope.key")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |" + strconv.Quote(filepath.Join(dir, "nope.key")) + ": open: no such file or directory"})

	p = write("dir.conf", "[Interface]", "PrivateKeyFile = keys")
	_, err = Load(p)
	checkErrors(t, err, []string{p + ":2: [Interface] PrivateKeyFile: |not a regular file"})

	_, err = Load(filepath.Join(dir, "absent.conf"))
	checkErrors(t, err, []string{filepath.Join(dir, "absent.conf") + ": |open: no such file or directory"})
	_, err = Load(dir)
	checkErrors(t, err, []string{dir + ": |is a directory"})
}

// Files holding keys are listed, and named when group or others can read
// them.
func TestExposedSecretFiles(t *testing.T) {
	dir := t.TempDir()
	k, _ := crypto.GeneratePrivateKey()
	keyFile := filepath.Join(dir, "private.key")
	if err := os.WriteFile(keyFile, []byte(k.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := crypto.GeneratePrivateKey()
	conf := filepath.Join(dir, "yip0.conf")
	text := "[Interface]\nPrivateKeyFile = private.key\n\n[Peer]\nPublicKey = " + p.Public().String() +
		"\nPresharedKey = " + k.String() + "\nAllowedIPs = 10.0.0.2/32\n"
	if err := os.WriteFile(conf, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
	c, err := Load(conf)
	if err != nil {
		t.Fatal(err)
	}
	got := c.ExposedSecretFiles()
	if len(got) != 2 || !strings.HasPrefix(got[0], keyFile) || !strings.HasPrefix(got[1], conf) {
		t.Fatalf("exposed: %q", got)
	}
	for _, f := range []string{keyFile, conf} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.ExposedSecretFiles(); len(got) != 0 {
		t.Fatalf("0600 files reported: %q", got)
	}
}

// The readKey step reads the PrivateKeyFile relative to the directory it is
// given and reports a problem at the PrivateKeyFile line; with the key
// known, finish checks the peers against it.
func TestReadKeyStep(t *testing.T) {
	_, privText, _ := testKey(t, 1)
	missing := func(path string) ([]byte, error) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	content := func(s string) keyReader {
		return func(string) ([]byte, error) { return []byte(s), nil }
	}
	for _, tc := range []struct {
		name, path string
		read       keyReader
		peer       string // PublicKey of a [Peer] at line 5, if any
		wantRead   string
		want       []string
	}{
		{"missing", "a.key", missing, "", "/cfg/a.key",
			[]string{`t.conf:3: [Interface] PrivateKeyFile: |"/cfg/a.key": open: file does not exist`}},
		{"absolute path", "/k/a.key", missing, "", "/k/a.key",
			[]string{`t.conf:3: [Interface] PrivateKeyFile: |"/k/a.key": open: file does not exist`}},
		{"not a key", "a.key", content("not a key\n"), "", "/cfg/a.key",
			[]string{`t.conf:3: [Interface] PrivateKeyFile: |"/cfg/a.key": private key must be 44 base64 characters`}},
		{"own public key", "a.key", content(privText + "\n"), "{OWNPUB}", "/cfg/a.key",
			[]string{"t.conf:5: [Peer] PublicKey: |is this interface's own public key (from PrivateKeyFile at line 3)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"# key in a file", "[Interface]", "PrivateKeyFile = " + tc.path}
			if tc.peer != "" {
				lines = append(lines, "[Peer]", "PublicKey = "+tc.peer)
			}
			p := parse("t.conf", []byte(testText(t, lines...)))
			if len(p.errs) != 0 {
				t.Fatalf("parse: %v", p.errs)
			}
			var read []string
			p.readKey("/cfg", func(path string) ([]byte, error) {
				read = append(read, path)
				return tc.read(path)
			})
			if !slices.Equal(read, []string{tc.wantRead}) {
				t.Errorf("read %q, want %q", read, tc.wantRead)
			}
			_, err := p.finish()
			checkErrors(t, err, tc.want)
		})
	}
}

// A config with hooks is named when someone else could change the
// commands: group or others may write it.
func TestWritableHookFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "yip0.conf")
	write := func(mode os.FileMode, lines ...string) *Config {
		t.Helper()
		if err := os.WriteFile(conf, []byte(testText(t, lines...)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(conf, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		c, err := Load(conf)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if got := write(0o666, "[Interface]", "PrivateKey = {PRIV}").WritableHookFile(); got != "" {
		t.Errorf("no hooks: %q", got)
	}
	if got := write(0o644, "[Interface]", "PrivateKey = {PRIV}", "PostUp = true").WritableHookFile(); got != "" {
		t.Errorf("mode 0644: %q", got)
	}
	if got := write(0o664, "[Interface]", "PrivateKey = {PRIV}", "PostDown = true").WritableHookFile(); got != conf+" (mode 0664) is writable by group or others" {
		t.Errorf("mode 0664: %q", got)
	}
}
