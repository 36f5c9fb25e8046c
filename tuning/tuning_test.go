// The helpers the tuning tests share (fake trees, running the script as
// root or not) and the tests of yip-tune's sysctl commands: check, apply
// and its dry run, and what needs root.

package tuning

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tests run yip-tune against fake /proc and /sys trees in temporary
// directories, never against the machine's own: every root the script reads
// or writes is pointed into t.TempDir().

const dropIn = "99-yip-router.conf"

// writeTree creates files (relative path -> content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot returns every file under root with its content, to show that a
// dry run changed nothing.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			m[p] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, v := range before {
		if w, ok := after[p]; !ok {
			t.Errorf("%s was removed", p)
		} else if v != w {
			t.Errorf("%s changed from %q to %q", p, v, w)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created", p)
		}
	}
}

// run runs yip-tune with args and env (KEY=VALUE) added to a sandbox where
// every root is in dir. It returns stdout, stderr and the exit code.
func run(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runAs(t, nil, dir, env, args...)
}

// runAs is run with the script started through prefix (a command and its
// arguments, such as setpriv to drop root).
func runAs(t *testing.T, prefix []string, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	script, err := filepath.Abs("yip-tune")
	if err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Abs(dropIn)
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string{}, prefix...), script), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		"YIP_CONF="+conf,
		"YIP_SYSCTL_DIR="+filepath.Join(dir, "etc-sysctl.d"),
		"YIP_STATE_DIR="+filepath.Join(dir, "state"),
		"YIP_PKG_DIR="+filepath.Join(dir, "usr-share"),
		"YIP_PROC="+filepath.Join(dir, "proc"),
		"YIP_SYS="+filepath.Join(dir, "sys"),
		"YIP_PROC_SYS="+filepath.Join(dir, "proc", "sys"),
	)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running yip-tune %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// lines splits output into lines with runs of blanks squeezed to one space,
// so the assertions do not depend on column widths.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

func sysctlTree(values map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range values {
		m[filepath.Join("proc", "sys", strings.ReplaceAll(k, ".", "/"))] = v + "\n"
	}
	return m
}

// okValues is a host tuned as the drop-in asks (rmem_max above it, which is
// fine for a maximum).
var okValues = map[string]string{
	"net.core.rmem_max":            "33554432",
	"net.core.wmem_max":            "4194304",
	"net.core.rmem_default":        "1048576",
	"net.core.wmem_default":        "1048576",
	"net.core.netdev_max_backlog":  "16384",
	"net.core.netdev_budget":       "600",
	"net.core.netdev_budget_usecs": "8000",
	"net.ipv4.ip_forward":          "1",
	"net.ipv6.conf.all.forwarding": "1",
	"net.core.busy_poll":           "0",
	"net.core.busy_read":           "0",
}

// stockValues is a stock kernel, with busy polling turned on and IPv6 off.
var stockValues = map[string]string{
	"net.core.rmem_max":            "212992",
	"net.core.wmem_max":            "212992",
	"net.core.rmem_default":        "212992",
	"net.core.wmem_default":        "212992",
	"net.core.netdev_max_backlog":  "1000",
	"net.core.netdev_budget":       "300",
	"net.core.netdev_budget_usecs": "2000",
	"net.ipv4.ip_forward":          "0",
	"net.core.busy_poll":           "50",
	"net.core.busy_read":           "0",
}

func TestCheck(t *testing.T) {
	header := "SETTING CURRENT RECOMMENDED STATUS"
	tests := []struct {
		name   string
		values map[string]string
		want   []string
		code   int
	}{
		{"tuned", okValues, []string{
			header,
			"net.core.rmem_max 33554432 16777216 OK",
			"net.core.wmem_max 4194304 4194304 OK",
			"net.core.rmem_default 1048576 1048576 OK",
			"net.core.wmem_default 1048576 1048576 OK",
			"net.core.netdev_max_backlog 16384 16384 OK",
			"net.core.netdev_budget 600 600 OK",
			"net.core.netdev_budget_usecs 8000 8000 OK",
			"net.ipv4.ip_forward 1 1 OK",
			"net.ipv6.conf.all.forwarding 1 1 OK",
			"net.core.busy_poll 0 0 OK (advisory, not applied)",
			"net.core.busy_read 0 0 OK (advisory, not applied)",
			"All settings OK.",
		}, 0},
		{"stock", stockValues, []string{
			header,
			"net.core.rmem_max 212992 16777216 LOW",
			"net.core.wmem_max 212992 4194304 LOW",
			"net.core.rmem_default 212992 1048576 LOW",
			"net.core.wmem_default 212992 1048576 LOW",
			"net.core.netdev_max_backlog 1000 16384 LOW",
			"net.core.netdev_budget 300 600 LOW",
			"net.core.netdev_budget_usecs 2000 8000 LOW",
			"net.ipv4.ip_forward 0 1 DIFF",
			"net.ipv6.conf.all.forwarding - 1 MISSING",
			"net.core.busy_poll 50 0 HIGH (advisory, not applied)",
			"net.core.busy_read 0 0 OK (advisory, not applied)",
			"Some settings differ from " + mustAbs(t, dropIn) + "; 'yip-tune apply' installs them (MISSING: the kernel lacks the key).",
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, sysctlTree(tc.values))
			before := snapshot(t, dir)
			out, errOut, code := run(t, dir, nil, "check")
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stderr: %s", code, tc.code, errOut)
			}
			got := lines(out)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			sameTree(t, before, snapshot(t, dir))
		})
	}
}

// An advisory setting above its ceiling is reported but is not a failure.
func TestCheckAdvisoryHighIsNotFailure(t *testing.T) {
	values := map[string]string{}
	for k, v := range okValues {
		values[k] = v
	}
	values["net.core.busy_read"] = "50"
	dir := t.TempDir()
	writeTree(t, dir, sysctlTree(values))
	out, errOut, code := run(t, dir, nil, "check")
	if code != 0 {
		t.Errorf("exit code %d, want 0; stderr: %s", code, errOut)
	}
	if !strings.Contains(strings.Join(lines(out), "\n"), "net.core.busy_read 50 0 HIGH (advisory, not applied)") {
		t.Errorf("no HIGH line for busy_read in:\n%s", out)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestApplyDryRunChangesNothing(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, sysctlTree(stockValues))
	if err := os.MkdirAll(filepath.Join(dir, "etc-sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	out, errOut, code := run(t, dir, nil, "apply", "--dry-run")
	if code != 0 {
		t.Fatalf("exit code %d; stderr: %s", code, errOut)
	}
	dst := filepath.Join(dir, "etc-sysctl.d", dropIn)
	got := lines(out)
	for _, want := range []string{
		"Would install " + mustAbs(t, dropIn) + " as " + dst + " (mode 0644).",
		"Would run: sysctl -p " + dst,
		"net.core.rmem_max: 212992 -> 16777216",
		"net.ipv4.ip_forward: 0 -> 1",
		"net.ipv6.conf.all.forwarding: missing -> 1",
	} {
		if !contains(got, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "busy_poll") {
		t.Errorf("apply would touch an advisory setting:\n%s", out)
	}
	sameTree(t, before, snapshot(t, dir))

	// revert --dry-run leaves an installed drop-in in place.
	writeTree(t, dir, map[string]string{filepath.Join("etc-sysctl.d", dropIn): "net.core.rmem_max = 4194304\n"})
	before = snapshot(t, dir)
	out, errOut, code = run(t, dir, nil, "revert", "--dry-run")
	if code != 0 {
		t.Fatalf("revert: exit code %d; stderr: %s", code, errOut)
	}
	for _, want := range []string{"Would remove " + dst + ".", "net.core.rmem_max = 4194304"} {
		if !contains(lines(out), want) {
			t.Errorf("revert: no line %q in:\n%s", want, out)
		}
	}
	sameTree(t, before, snapshot(t, dir))
}

func TestNeedsRoot(t *testing.T) {
	var prefix []string
	if os.Geteuid() == 0 {
		// Drop to nobody to see what a non-root user sees.
		sp, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("running as root without setpriv: cannot check the non-root message")
		}
		prefix = []string{sp, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	// Not t.TempDir: its parent is 0700, and nobody must see the drop-in below.
	dir, err := os.MkdirTemp("", "yip-tune-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply"}, {"revert"}, {"irq", "eth0"}} {
		if args[0] == "revert" {
			// revert only needs root when there is a drop-in to remove.
			writeTree(t, dir, map[string]string{filepath.Join("etc-sysctl.d", dropIn): "net.core.rmem_max = 4194304\n"})
		}
		_, errOut, code := runAs(t, prefix, dir, nil, args...)
		if code != 2 || !strings.Contains(errOut, "needs root") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and 'needs root'", args, code, errOut)
		}
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
