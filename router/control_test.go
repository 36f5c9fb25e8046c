package router

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A second router on the same control socket must not delete the first
// one's socket; the socket is created 0600.
func TestControlSocketRefusesLiveRouter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "yip0.sock")
	a, b := newTestRouter(t), newTestRouter(t)
	if err := a.ServeControl(path); err != nil {
		t.Fatal(err)
	}
	defer func() { close(a.stop); a.wg.Wait() }()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Fatalf("socket mode %o, want 600", m)
	}
	if err := b.ServeControl(path); err == nil {
		close(b.stop)
		b.wg.Wait()
		t.Fatal("second router took over a live control socket")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("first router's socket gone: %v", err)
	}
	c.Close()

	// A stale socket (nobody listening) is replaced.
	stale := filepath.Join(t.TempDir(), "yip1.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if err := b.ServeControl(stale); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	close(b.stop)
	b.wg.Wait()
}

// Two namespaces, one interface name: two socket paths.
func TestSocketPathPerNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	host := SocketPath("yip0")
	got := make(chan string)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			got <- "unshare: " + err.Error()
			return
		}
		got <- SocketPath("yip0")
	}()
	ns := <-got
	if strings.HasPrefix(ns, "unshare") {
		t.Fatal(ns)
	}
	if ns == host || !strings.Contains(ns, "yip0:net") {
		t.Fatalf("host %s, namespace %s", host, ns)
	}
}

// Sockets lists the routers of the caller's namespace only, unless asked
// for all: two namespaces may each run a yip0.
func TestSocketsOfThisNamespace(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"yip0.sock", "wg1.sock", "yip0:net4026532281.sock", "yip0:net4026532999.sock", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names := func(self uint64, init, all bool) string {
		ps, err := socketsIn(dir, self, init, all)
		if err != nil {
			t.Fatal(err)
		}
		var b []string
		for _, p := range ps {
			b = append(b, filepath.Base(p))
		}
		return strings.Join(b, " ")
	}
	for _, c := range []struct {
		self      uint64
		init, all bool
		want      string
	}{
		{4026531840, true, false, "wg1.sock yip0.sock"},
		{4026532281, false, false, "yip0:net4026532281.sock"},
		{4026532000, false, false, ""},
		{4026531840, true, true, "wg1.sock yip0.sock yip0:net4026532281.sock yip0:net4026532999.sock"},
		// PID 1's namespace, and a router (a systemd unit without
		// CAP_SYS_PTRACE) that named its socket after the inode.
		{4026532999, true, false, "wg1.sock yip0.sock yip0:net4026532999.sock"},
	} {
		if got := names(c.self, c.init, c.all); got != c.want {
			t.Errorf("namespace %d (init %v), all %v: %q, want %q", c.self, c.init, c.all, got, c.want)
		}
	}
}
