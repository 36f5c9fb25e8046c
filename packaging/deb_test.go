package packaging

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDeb unpacks the package `make deb` built (YIP_DEB names it; make
// deb-check, part of make test, sets it) with dpkg-deb -x and checks what
// it installs: the binary runs and says the version the package has, every
// command has a man page, the completions, the unit (tuning/'s, whose
// TestUnitVerifies runs systemd-analyze verify on it) starts
// /usr/sbin/yip-router, and the copyright file names every module linked
// into the binary.
func TestDeb(t *testing.T) {
	deb := os.Getenv("YIP_DEB")
	if deb == "" {
		t.Skip("YIP_DEB is not set: `make deb-check` (part of `make test`) builds the .deb and runs this test on it")
	}
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		t.Skip("dpkg-deb missing (Debian package dpkg): cannot unpack " + deb)
	}
	root := t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
	}
	field := func(name string) string {
		out, err := exec.Command(dpkgDeb, "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	path := func(p string) string { return filepath.Join(root, p) }

	// The packaged binary runs and its version is the package's.
	bin := path("usr/sbin/yip-router")
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	m := regexp.MustCompile(`^yip-router (\S+) \(wire version \d+, go[0-9.]+\)\n$`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("--version: %q", out)
	}
	version := field("Version")
	if v, err := debVersion(t, m[1]); err != nil || v != version {
		t.Errorf("the binary is %s, Debian version %q (%v); the package is %s", m[1], v, err, version)
	}
	if got := gunzip(t, path("usr/share/doc/yip-router/changelog.gz")); !strings.HasPrefix(got, "yip-router ("+version+") ") {
		t.Errorf("changelog.gz does not start with this version's entry:\n%s", got)
	}

	// A man page for the binary, each of its commands, and yip-tune.
	out, err = exec.Command(bin, "__complete", "").Output()
	if err != nil {
		t.Fatalf("listing the commands: %v", err)
	}
	pages := []string{"yip-router.8.gz", "yip-tune.8.gz"}
	for _, l := range strings.Split(string(out), "\n") {
		if c, _, _ := strings.Cut(l, "\t"); c != "" && !strings.HasPrefix(c, ":") && c != "help" {
			pages = append(pages, "yip-router-"+c+".8.gz")
		}
	}
	if len(pages) < 8 {
		t.Fatalf("commands: %q", out)
	}
	for _, p := range pages {
		if page := gunzip(t, path("usr/share/man/man8/"+p)); !strings.Contains(page, ".TH ") {
			t.Errorf("%s is not a man page:\n%.200s", p, page)
		}
	}
	for _, p := range []string{
		"usr/share/bash-completion/completions/yip-router",
		"usr/share/zsh/vendor-completions/_yip-router",
		"usr/share/fish/vendor_completions.d/yip-router.fish",
	} {
		if b, err := os.ReadFile(path(p)); err != nil || !bytes.Contains(b, []byte("yip-router")) {
			t.Errorf("%s: %v, %d bytes", p, err, len(b))
		}
	}

	// The unit is tuning's and starts the packaged binary.
	unit, err := os.ReadFile(path("lib/systemd/system/yip-router@.service"))
	if err != nil {
		t.Fatal(err)
	}
	if src, err := os.ReadFile("../tuning/yip-router@.service"); err != nil || !bytes.Equal(unit, src) {
		t.Errorf("the packaged unit is not tuning/yip-router@.service (%v)", err)
	}
	if !regexp.MustCompile(`(?m)^ExecStart=/usr/sbin/yip-router up `).Match(unit) {
		t.Error("the unit's ExecStart does not run /usr/sbin/yip-router up")
	}

	// yip-tune finds the drop-in the package put beside it in
	// /usr/share/yip-router (YIP_PKG_DIR stands for that path here).
	tune := exec.Command(path("usr/sbin/yip-tune"), "apply", "--dry-run")
	tune.Env = append(os.Environ(), "YIP_PKG_DIR="+path("usr/share/yip-router"), "YIP_SYSCTL_DIR="+t.TempDir())
	if out, err := tune.CombinedOutput(); err != nil || !strings.Contains(string(out), "Would install "+path("usr/share/yip-router/99-yip-router.conf")) {
		t.Errorf("yip-tune apply --dry-run: %v\n%s", err, out)
	}

	// Modes: the config directory is root's only; scripts run.
	listing, err := exec.Command(dpkgDeb, "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`drwx------ root/root .* \./etc/yip-router/`,
		`-rwxr-xr-x root/root .* \./usr/sbin/yip-router`,
		`-rwxr-xr-x root/root .* \./usr/sbin/yip-tune`,
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).Match(listing) {
			t.Errorf("no %s in:\n%s", want, listing)
		}
	}

	// The copyright file names every module in the binary.
	copyright, err := os.ReadFile(path("usr/share/doc/yip-router/copyright"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	deps := regexp.MustCompile(`(?m)^\s+dep\s+(\S+)\s`).FindAllSubmatch(out, -1)
	if len(deps) == 0 {
		t.Fatalf("no modules in go version -m:\n%s", out)
	}
	for _, d := range deps {
		if !bytes.Contains(copyright, append(d[1], "/*"...)) {
			t.Errorf("packaging/copyright does not name %s, which the binary holds", d[1])
		}
	}
}

func gunzip(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return string(b)
}
