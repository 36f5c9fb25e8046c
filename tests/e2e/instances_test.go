package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/netns"
)

// TestInstancesSideBySide runs two routers in one namespace as two
// instances of the systemd unit would (`up -c FILE --name INSTANCE`, the
// files' Name left at its default), each telling a Type=notify service
// manager when it is ready: READY=1 comes only once its interface exists,
// both run side by side with their own interface and control socket, a
// SIGHUP reports RELOADING=1 then READY=1, and stopping one (STOPPING=1)
// leaves the other answering.
func TestInstancesSideBySide(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("end-to-end test skipped: ", err)
	}
	ns := fmt.Sprintf("yipI-%d", os.Getpid())
	if err := netns.Add(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Del(ns) })
	dir := t.TempDir()
	type instance struct {
		name   string
		cmd    *exec.Cmd
		notify *net.UnixConn
		log    bytes.Buffer
	}
	var ins []*instance
	for i, name := range []string{"yipi0", "yipi1"} {
		key, err := crypto.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, name+".conf")
		body := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = 10.%d.0.1/24\n", key, 47200+i, 210+i)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(dir, name+".notify")
		nc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		in := &instance{name: name, notify: nc}
		in.cmd = exec.Command("ip", "netns", "exec", ns, bin, "up", "-c", conf, "--name", name, "--shards", "1")
		in.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
		in.cmd.Stdout, in.cmd.Stderr = &in.log, &in.log
		if err := in.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = in.cmd.Process.Signal(syscall.SIGTERM)
			_ = in.cmd.Wait()
			if t.Failed() {
				t.Logf("--- %s log ---\n%s", in.name, in.log.String())
			}
		})
		ins = append(ins, in)
	}
	next := func(in *instance) string {
		t.Helper()
		_ = in.notify.SetReadDeadline(time.Now().Add(15 * time.Second))
		b := make([]byte, 256)
		n, err := in.notify.Read(b)
		if err != nil {
			t.Fatalf("%s: no notification: %v", in.name, err)
		}
		return string(b[:n])
	}
	for _, in := range ins {
		if got := next(in); got != "READY=1" {
			t.Fatalf("%s: first notification %q, want READY=1", in.name, got)
		}
		// Ready means the interface is there, up, with its address.
		out, err := exec.Command("ip", "-n", ns, "-o", "addr", "show", "dev", in.name).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "inet 10.") {
			t.Fatalf("%s ready but its interface is not: %v %s", in.name, err, out)
		}
	}
	show := func() string {
		out, _ := exec.Command("ip", "netns", "exec", ns, bin, "show", "all").CombinedOutput()
		return string(out)
	}
	if out := show(); !strings.Contains(out, "interface: yipi0") || !strings.Contains(out, "interface: yipi1") {
		t.Fatalf("show all does not list both instances:\n%s", out)
	}
	_ = ins[0].cmd.Process.Signal(syscall.SIGHUP)
	if got := next(ins[0]); !strings.HasPrefix(got, "RELOADING=1\n") {
		t.Fatalf("reload: %q, want RELOADING=1", got)
	}
	if got := next(ins[0]); got != "READY=1" {
		t.Fatalf("after the reload: %q, want READY=1", got)
	}
	_ = ins[0].cmd.Process.Signal(syscall.SIGTERM)
	if got := next(ins[0]); got != "STOPPING=1" {
		t.Fatalf("stop: %q, want STOPPING=1", got)
	}
	_ = ins[0].cmd.Wait()
	out := show()
	if strings.Contains(out, "interface: yipi0") || !strings.Contains(out, "interface: yipi1") {
		t.Fatalf("after stopping yipi0, show all:\n%s", out)
	}
}
