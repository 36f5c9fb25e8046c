package sdnotify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen makes a notify socket (a path, or an abstract name with abstract)
// and points $NOTIFY_SOCKET at it.
func listen(t *testing.T, abstract bool) *net.UnixConn {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	env := name
	if abstract {
		name = "\x00yip-sdnotify-test-" + filepath.Base(t.TempDir())
		env = "@" + name[1:]
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", env)
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b := make([]byte, 256)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

func TestStates(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		c := listen(t, abstract)
		if ok, err := Ready(); !ok || err != nil {
			t.Fatalf("abstract %v: Ready: %v %v", abstract, ok, err)
		}
		if got := read(t, c); got != "READY=1" {
			t.Fatalf("abstract %v: got %q", abstract, got)
		}
		if ok, err := Reloading(); !ok || err != nil {
			t.Fatalf("Reloading: %v %v", ok, err)
		}
		if got := read(t, c); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") || len(got) <= len("RELOADING=1\nMONOTONIC_USEC=") {
			t.Fatalf("got %q", got)
		}
		if _, err := Stopping(); err != nil {
			t.Fatal(err)
		}
		if got := read(t, c); got != "STOPPING=1" {
			t.Fatalf("got %q", got)
		}
	}
}

// Without a service manager nothing is sent and nothing fails; with a
// socket that is gone, the error says so.
func TestNoManager(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if ok, err := Ready(); ok || err != nil {
		t.Fatalf("no NOTIFY_SOCKET: %v %v", ok, err)
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	if ok, err := Ready(); ok || err == nil {
		t.Fatalf("missing socket: %v %v", ok, err)
	}
}
