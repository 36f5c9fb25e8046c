package tuning

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	"net.core.rmem_max":            "8388608",
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
			"net.core.rmem_max 8388608 4194304 OK",
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
			"net.core.rmem_max 212992 4194304 LOW",
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
		"net.core.rmem_max: 212992 -> 4194304",
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

// interrupts builds a /proc/interrupts with ncpu CPU columns and the named IRQs.
func interrupts(ncpu int, irqs map[int]string) string {
	var b strings.Builder
	b.WriteString("     ")
	for c := 0; c < ncpu; c++ {
		b.WriteString("       CPU" + strconv.Itoa(c))
	}
	b.WriteString("\n  0:")
	for c := 0; c < ncpu; c++ {
		b.WriteString("         12")
	}
	b.WriteString("   IO-APIC   2-edge      timer\n")
	for n := 0; n < 1000; n++ {
		name, ok := irqs[n]
		if !ok {
			continue
		}
		b.WriteString(" " + strconv.Itoa(n) + ":")
		for c := 0; c < ncpu; c++ {
			b.WriteString("       1000")
		}
		b.WriteString("   PCI-MSI 52428" + strconv.Itoa(n%10) + "-edge      " + name + "\n")
	}
	b.WriteString("NMI:")
	for c := 0; c < ncpu; c++ {
		b.WriteString("          0")
	}
	b.WriteString("   Non-maskable interrupts\n")
	return b.String()
}

func irqTree(ncpu int, irqs map[int]string, dev string, nrx, ntx int) map[string]string {
	m := map[string]string{filepath.Join("proc", "interrupts"): interrupts(ncpu, irqs)}
	all := "0-" + strconv.Itoa(ncpu-1)
	for n := range irqs {
		m[filepath.Join("proc", "irq", strconv.Itoa(n), "smp_affinity_list")] = all + "\n"
	}
	q := filepath.Join("sys", "class", "net", dev, "queues")
	for i := 0; i < nrx; i++ {
		m[filepath.Join(q, "rx-"+strconv.Itoa(i), "rps_cpus")] = "0\n"
	}
	for i := 0; i < ntx; i++ {
		m[filepath.Join(q, "tx-"+strconv.Itoa(i), "xps_cpus")] = "0\n"
	}
	return m
}

func TestIRQDryRun(t *testing.T) {
	tests := []struct {
		name string
		ncpu int
		irqs map[int]string
		nrx  int
		ntx  int
		args []string
		want []string
	}{
		{
			name: "shards on 4-7",
			ncpu: 8,
			irqs: map[int]string{
				45: "eth0", 46: "eth0-TxRx-0", 47: "eth0-TxRx-1", 48: "eth0-TxRx-2", 49: "eth0-TxRx-3",
				50: "eth10-TxRx-0", // another device whose name starts the same way
			},
			nrx: 4, ntx: 4,
			args: []string{"--shards-cpus", "4-7"},
			want: []string{
				"Plan for eth0: 5 IRQs, 4 rx queues, 4 tx queues, online CPUs 0-7",
				"Shard CPUs: 4-7 (start the router with: taskset -c 4-7 yip-router up ..., or CPUAffinity=4-7)",
				"IRQ CPUs: 0-3",
				"irq 45 eth0 -> cpu 0",
				"irq 46 eth0-TxRx-0 -> cpu 1",
				"irq 47 eth0-TxRx-1 -> cpu 2",
				"irq 48 eth0-TxRx-2 -> cpu 3",
				"irq 49 eth0-TxRx-3 -> cpu 0",
				"RPS off: 4 rx queues >= 4 IRQ CPUs, so each queue's IRQ CPU does its own processing",
				"rx-0 rps_cpus 0",
				"rx-1 rps_cpus 0",
				"rx-2 rps_cpus 0",
				"rx-3 rps_cpus 0",
				"XPS: every CPU sends on one tx queue (CPU index modulo 4)",
				"tx-0 xps_cpus 11",
				"tx-1 xps_cpus 22",
				"tx-2 xps_cpus 44",
				"tx-3 xps_cpus 88",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
		{
			name: "explicit IRQ CPUs, RPS on",
			ncpu: 8,
			irqs: map[int]string{30: "eth0-rx-0", 31: "eth0-tx-0"},
			nrx:  1, ntx: 1,
			args: []string{"--shards-cpus", "2-7", "--irq-cpus", "0,1"},
			want: []string{
				"Plan for eth0: 2 IRQs, 1 rx queues, 1 tx queues, online CPUs 0-7",
				"Shard CPUs: 2-7 (start the router with: taskset -c 2-7 yip-router up ..., or CPUAffinity=2-7)",
				"IRQ CPUs: 0-1",
				"irq 30 eth0-rx-0 -> cpu 0",
				"irq 31 eth0-tx-0 -> cpu 1",
				"RPS on: 1 rx queues < 2 IRQ CPUs, so receive processing is spread over the IRQ CPUs",
				"rx-0 rps_cpus 3",
				"XPS: every CPU sends on one tx queue (CPU index modulo 1)",
				"tx-0 xps_cpus ff",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
		{
			name: "no shard CPUs, 40 CPUs",
			ncpu: 40,
			irqs: map[int]string{60: "eth0-TxRx-0", 61: "eth0-TxRx-1"},
			nrx:  2, ntx: 2,
			want: []string{
				"Plan for eth0: 2 IRQs, 2 rx queues, 2 tx queues, online CPUs 0-39",
				"Shard CPUs: not given (--shards-cpus); IRQs go to all CPUs",
				"IRQ CPUs: 0-39",
				"irq 60 eth0-TxRx-0 -> cpu 0",
				"irq 61 eth0-TxRx-1 -> cpu 1",
				"RPS on: 2 rx queues < 40 IRQ CPUs, so receive processing is spread over the IRQ CPUs",
				"rx-0 rps_cpus ff,ffffffff",
				"rx-1 rps_cpus ff,ffffffff",
				"XPS: every CPU sends on one tx queue (CPU index modulo 2)",
				"tx-0 xps_cpus 55,55555555",
				"tx-1 xps_cpus aa,aaaaaaaa",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, irqTree(tc.ncpu, tc.irqs, "eth0", tc.nrx, tc.ntx))
			before := snapshot(t, dir)
			args := append([]string{"irq", "eth0"}, tc.args...)
			args = append(args, "--dry-run")
			out, errOut, code := run(t, dir, nil, args...)
			if code != 0 {
				t.Fatalf("exit code %d; stderr: %s", code, errOut)
			}
			got := lines(out)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			sameTree(t, before, snapshot(t, dir))
		})
	}
}

func TestIRQErrors(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, irqTree(4, map[int]string{40: "eth0-TxRx-0"}, "eth0", 1, 1))
	writeTree(t, dir, map[string]string{filepath.Join("sys", "class", "net", "virt0", "queues", "rx-0", "rps_cpus"): "0\n"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"irq", "--dry-run"}, "irq: which device?"},
		{[]string{"irq", "nosuch0", "--dry-run"}, "no network device 'nosuch0'"},
		{[]string{"irq", "virt0", "--dry-run"}, "no IRQs named after virt0"},
		{[]string{"irq", "eth0", "--shards-cpus", "2-9", "--dry-run"}, "--shards-cpus: CPU 4 is not online (online: 0-3)"},
		{[]string{"irq", "eth0", "--irq-cpus", "3-1", "--dry-run"}, "bad CPU range '3-1'"},
		{[]string{"irq", "eth0", "--bogus", "--dry-run"}, "unknown option '--bogus'"},
		{[]string{"frobnicate"}, "unknown command 'frobnicate'"},
	} {
		_, errOut, code := run(t, dir, nil, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// The drop-in must let each shard socket get the buffer it asks for.
func TestDropInCoversShardBuffers(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "shard", "udp", "udp_linux.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const bufferSize = (\d+) << (\d+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no `const bufferSize = A << B` in shard/udp/udp_linux.go; update this test to match")
	}
	a, _ := strconv.Atoi(string(m[1]))
	s, _ := strconv.Atoi(string(m[2]))
	want := a << s
	conf, err := os.ReadFile(dropIn)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"net.core.rmem_max", "net.core.wmem_max"} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s*=\s*(\d+)\s*$`).FindSubmatch(conf)
		if m == nil {
			t.Errorf("%s is not set in %s", key, dropIn)
			continue
		}
		if v, _ := strconv.Atoi(string(m[1])); v < want {
			t.Errorf("%s = %d, below the %d bytes each shard socket requests", key, v, want)
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
