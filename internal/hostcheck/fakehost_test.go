// The fake host the tests run Check against: /proc, /sys and /dev as files
// in a temporary directory, stubs for the probes, a config writer, and the
// helpers that print a report and check its lines.

package hostcheck

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/config"
)

// fakeHost is a machine made of files and stubs.
type fakeHost struct {
	dir    string
	files  map[string]string // relative to dir: "proc/sys/net/core/rmem_max"
	mask   []int
	tunErr map[int]error // by queue count
	route  map[netip.Addr]string
	gro    bool
	lro    bool
	offErr error
	udpErr error
	tunnel config.OffloadSet // what the offload probe grants
	// bufShort: the buffer probe's socket got less than it asked for.
	bufShort bool
}

func newFake(t *testing.T) *fakeHost {
	return &fakeHost{
		dir: t.TempDir(),
		files: map[string]string{
			"proc/sys/net/core/rmem_max":                   "16777216\n",
			"proc/sys/net/core/wmem_max":                   "8388608\n",
			"proc/sys/net/ipv4/ip_forward":                 "1\n",
			"proc/sys/net/ipv6/conf/all/forwarding":        "1\n",
			"dev/net/tun":                                  "",
			"sys/class/net/eth0/mtu":                       "1500\n",
			"sys/devices/system/cpu/online":                "0-3\n",
			"sys/devices/system/cpu/cpu0/topology/core_id": "0\n",
		},
		mask:   []int{0, 1, 2, 3},
		tunErr: map[int]error{},
		route:  map[netip.Addr]string{netip.MustParseAddr("203.0.113.2"): "eth0"},
		gro:    true,
		tunnel: config.OffloadSet{TSO: true, USO: true, GRO: true, UDPGSO: true, UDPGRO: true},
	}
}

// smt gives the fake 4 CPUs on 2 cores: 0,2 on core 0 and 1,3 on core 1
// (how Linux numbers SMT siblings on many x86 machines).
func (f *fakeHost) smt() {
	for cpu := range 4 {
		f.files[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu)] = "0\n"
		f.files[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/core_id", cpu)] = fmt.Sprintf("%d\n", cpu%2)
	}
}

func (f *fakeHost) env(t *testing.T) Env {
	t.Helper()
	for p, c := range f.files {
		full := filepath.Join(f.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Env{
		Proc: filepath.Join(f.dir, "proc"), Sys: filepath.Join(f.dir, "sys"), Dev: filepath.Join(f.dir, "dev"),
		Root:         true,
		AffinityCPUs: func() ([]int, error) { return f.mask, nil },
		OpenTUN:      func(q int) error { return f.tunErr[q] },
		RouteTo: func(a netip.Addr, _ uint32) (string, error) {
			if n, ok := f.route[a]; ok {
				return n, nil
			}
			return "", errors.New("network unreachable")
		},
		Offloads:      func(string) (bool, bool, error) { return f.gro, f.lro, f.offErr },
		ProbeOffloads: func() (config.OffloadSet, error) { return f.tunnel, nil },
		SocketBuffers: func() (bool, error) { return f.bufShort, nil },
		ListenUDP:     func(netip.AddrPort) error { return f.udpErr },
		ListenTCP:     func(netip.AddrPort) error { return nil },
	}
}

const confTmpl = `[Interface]
PrivateKey = mEktyZiojIy60rG4S9RRaZ7YANfmaKua/Unus6HfIGg=
ListenPort = 47133
Address = 10.77.0.1/24
%s
[Peer]
PublicKey = aNIXAzi6ximvC5aN6U9ySX345YxOa6gtHjBu6FsZxVM=
Endpoint = 203.0.113.2:47133
AllowedIPs = 10.77.0.2/32, 192.168.2.0/24
`

func writeConf(t *testing.T, iface string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gw.conf")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(confTmpl, iface)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func report(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// expect checks that the report has a line starting with each prefix, and
// no ERROR/WARN lines beyond those expected.
func expect(t *testing.T, fs []Finding, prefixes ...string) {
	t.Helper()
	rep := report(fs)
	lines := strings.Split(rep, "\n")
	for _, p := range prefixes {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, p) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line starting %q", p)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "ERROR") && !strings.HasPrefix(l, "WARN") {
			continue
		}
		ok := false
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("unexpected %q", l)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", rep)
	}
}
