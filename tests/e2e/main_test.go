// Package e2e runs yip-router end to end: two router processes in two
// network namespaces over veth, real multiqueue TUN devices, real traffic.
// Root only; skipped with a message otherwise (CI runs as root).
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

var bin string

func TestMain(m *testing.M) {
	if err := netns.Available(); err != nil {
		fmt.Println("e2e tests skipped:", err)
		os.Exit(m.Run()) // each test skips itself too
	}
	dir, err := os.MkdirTemp("", "yip-e2e-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "yip-router")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/yip-router").CombinedOutput()
	if err != nil {
		fmt.Printf("building yip-router: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newLab starts both routers (B first: it only answers) and waits for the
// tunnel. The routers' logs are printed if the test fails.
func newLab(t *testing.T, opts lab.Options) *lab.Lab {
	t.Helper()
	return newLabWith(t, opts, nil)
}

// newLabWith is newLab with before run on the lab before the routers
// start (addresses, firewalls, configuration changes).
func newLabWith(t *testing.T, opts lab.Options, before func(*lab.Lab) error) *lab.Lab {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip("end-to-end test skipped: ", err)
	}
	opts.Bin = bin
	opts.Keep = true
	l, err := lab.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for s := range 2 {
				t.Logf("--- router %c log ---\n%s", 'A'+s, tail(l.Log(lab.Side(s)), 60))
			}
		}
		l.Close()
		os.RemoveAll(l.Dir)
	})
	if before != nil {
		if err := before(l); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []lab.Side{lab.B, lab.A} {
		if err := l.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func tail(s string, lines int) string {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			n++
			if n > lines {
				return s[i+1:]
			}
		}
	}
	return s
}
