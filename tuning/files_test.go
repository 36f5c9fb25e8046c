// Tests of the files beside the script: the drop-in covers the shard
// sockets' buffers, the unit holds what the router needs and
// systemd-analyze accepts it, the script finds the drop-in where it is
// installed, the man page names all the script takes, and the script is
// executable and shellcheck-clean.

package tuning

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The drop-in must let each shard socket get the buffers it asks for
// (shard/udp/buffers.go): rmem_max the receive buffer, wmem_max the send
// buffer.
func TestDropInCoversShardBuffers(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "shard", "udp", "buffers.go"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(dropIn)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ name, key string }{{"RecvBuffer", "net.core.rmem_max"}, {"SendBuffer", "net.core.wmem_max"}} {
		m := regexp.MustCompile(b.name + ` += (\d+) << (\d+)`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("no `%s = A << B` in shard/udp/buffers.go; update this test to match", b.name)
		}
		a, _ := strconv.Atoi(string(m[1]))
		sh, _ := strconv.Atoi(string(m[2]))
		want := a << sh
		v := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(b.key) + `\s*=\s*(\d+)\s*$`).FindSubmatch(conf)
		if v == nil {
			t.Errorf("%s is not set in %s", b.key, dropIn)
			continue
		}
		if n, _ := strconv.Atoi(string(v[1])); n < want {
			t.Errorf("%s = %d, below the %d bytes each shard socket asks for (%s)", b.key, n, want, b.name)
		}
	}
}

func TestUnit(t *testing.T) {
	b, err := os.ReadFile("yip-router@.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"ExecStart=/usr/sbin/yip-router up -c /etc/yip-router/%i.conf --name %i",
		"Type=notify",
		"NotifyAccess=main",
		"RuntimeDirectoryPreserve=yes",
		"ExecReload=/bin/kill -HUP $MAINPID",
		"Restart=on-failure",
		"AmbientCapabilities=CAP_NET_ADMIN CAP_BPF",
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_BPF",
		"LimitMEMLOCK=infinity",
		"SystemCallFilter=@system-service bpf",
		"SystemCallErrorNumber=EPERM",
		"DeviceAllow=/dev/net/tun rw",
		"ProtectSystem=strict",
		"NoNewPrivileges=yes",
		"RuntimeDirectory=yip-router",
		"RestrictAddressFamilies=AF_INET AF_INET6 AF_NETLINK AF_UNIX",
		"#CPUAffinity=",
		"LimitNOFILE=",
	} {
		if !contains(strings.Split(unit, "\n"), want) && !strings.Contains(unit, "\n"+want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	// PrivateDevices=yes would hide /dev/net/tun.
	if regexp.MustCompile(`(?m)^PrivateDevices=(yes|true|1)`).MatchString(unit) {
		t.Error("PrivateDevices=yes hides /dev/net/tun")
	}
}

// Without YIP_CONF, yip-tune takes the drop-in beside it (a checkout),
// else the one the .deb put in /usr/share/yip-router (yip-tune is then in
// /usr/sbin), else the installed one.
func TestFindsDropIn(t *testing.T) {
	src, err := os.ReadFile("yip-tune")
	if err != nil {
		t.Fatal(err)
	}
	dropin, err := os.ReadFile(dropIn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "sbin", "yip-tune")
	pkg, sysctl := filepath.Join(dir, "share"), filepath.Join(dir, "sysctl.d")
	writeTree(t, dir, map[string]string{"sbin/yip-tune": string(src)})
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	installs := func() (string, int) {
		t.Helper()
		cmd := exec.Command(script, "apply", "--dry-run")
		cmd.Env = append(os.Environ(), "YIP_CONF=", "YIP_PKG_DIR="+pkg, "YIP_SYSCTL_DIR="+sysctl,
			"YIP_STATE_DIR="+filepath.Join(dir, "state"), "YIP_PROC_SYS="+filepath.Join(dir, "proc-sys"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`Would install (\S+) as`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("no 'Would install' in:\n%s", out)
		}
		return m[1], 0
	}
	if out, code := installs(); code != 2 || !strings.Contains(out, "cannot find "+dropIn) {
		t.Errorf("no drop-in anywhere: exit %d, %q", code, out)
	}
	writeTree(t, sysctl, map[string]string{dropIn: string(dropin)})
	if got, _ := installs(); got != filepath.Join(sysctl, dropIn) {
		t.Errorf("only the installed drop-in: took %s", got)
	}
	writeTree(t, pkg, map[string]string{dropIn: string(dropin)})
	if got, _ := installs(); got != filepath.Join(pkg, dropIn) {
		t.Errorf("the package's and the installed drop-in: took %s, want the package's", got)
	}
	writeTree(t, dir, map[string]string{"sbin/" + dropIn: string(dropin)})
	if got, _ := installs(); got != filepath.Join(dir, "sbin", dropIn) {
		t.Errorf("a drop-in beside the script: took %s", got)
	}
}

// The man page names every command, option (of its usage) and
// environment variable of the script.
func TestManPage(t *testing.T) {
	script, err := os.ReadFile("yip-tune")
	if err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile("yip-tune.8")
	if err != nil {
		t.Fatal(err)
	}
	cmds := regexp.MustCompile(`(?m)^([a-z]+)(?: \| [-a-z]+)*\) `).FindAllSubmatch(script, -1)
	usage := regexp.MustCompile(`(?s)\nusage\(\) \{.*?\n\}`).Find(script)
	opts := regexp.MustCompile(`--[a-z]+(?:-[a-z]+)*`).FindAll(usage, -1)
	vars := regexp.MustCompile(`\bYIP_[A-Z_]+`).FindAll(script, -1)
	if len(cmds) < 5 || len(opts) < 3 || len(vars) < 7 {
		t.Fatalf("found %d commands, %d options, %d variables in yip-tune: the patterns are stale", len(cmds), len(opts), len(vars))
	}
	var names []string
	for _, m := range cmds {
		names = append(names, ".B "+string(m[1]))
	}
	for _, o := range opts {
		names = append(names, strings.ReplaceAll(string(o), "-", `\-`))
	}
	for _, v := range vars {
		names = append(names, "\n.B "+string(v)+"\n")
	}
	for _, n := range names {
		if !bytes.Contains(man, []byte(n)) {
			t.Errorf("yip-tune.8 does not name %q", n)
		}
	}
}

func TestScriptIsExecutable(t *testing.T) {
	fi, err := os.Stat("yip-tune")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Errorf("yip-tune mode %v is not executable", fi.Mode())
	}
}

func TestShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed; `make lint` installs it (apt-get install shellcheck)")
	}
	out, err := exec.Command(sc, "yip-tune").CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck yip-tune: %v\n%s", err, out)
	}
}

// systemd-analyze verify accepts the unit, as an instance (the template
// itself is not a unit), with ExecStart pointing at an executable that
// exists here.
func TestUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (package systemd)")
	}
	b, err := os.ReadFile("yip-router@.service")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand in for the binary")
	}
	unit := strings.ReplaceAll(string(b), "/usr/sbin/yip-router", bin)
	path := filepath.Join(t.TempDir(), "yip-router@wg0.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	// --man=no: the man pages of Documentation= come with the .deb, which
	// this machine need not have installed.
	out, err := exec.Command(sa, "verify", "--man=no", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	if len(out) > 0 {
		// It exits 0 on what it ignores (an unknown Type=, a bad
		// directive): anything it says is a finding.
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
}
