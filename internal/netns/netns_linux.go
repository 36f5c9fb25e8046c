// Package netns makes and uses network namespaces for the end-to-end tests
// and the demo: two "gateways" on one machine joined by a veth pair.
// Namespaces are named (ip netns add), so `ip -n NAME ...` configures them
// and an operator can inspect a failed test's leftovers.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Available reports why namespaces cannot be used here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, veth, TUN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("needs the ip command (iproute2)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return errors.New("needs /dev/net/tun")
	}
	return nil
}

// IP runs the ip command with args and returns an error with its output.
func IP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Add creates a named namespace with its loopback up.
func Add(name string) error {
	if err := IP("netns", "add", name); err != nil {
		return err
	}
	return IP("-n", name, "link", "set", "lo", "up")
}

// Del removes a namespace (and with it its veth end and TUN devices).
func Del(name string) error { return IP("netns", "del", name) }

// Veth joins namespaces a and b with a veth pair named ifA/ifB, addresses
// addrA/addrB (CIDR), both up.
func Veth(a, ifA, addrA, b, ifB, addrB string) error {
	steps := [][]string{
		{"link", "add", ifA, "netns", a, "type", "veth", "peer", "name", ifB, "netns", b},
		{"-n", a, "addr", "add", addrA, "dev", ifA},
		{"-n", b, "addr", "add", addrB, "dev", ifB},
		{"-n", a, "link", "set", ifA, "up"},
		{"-n", b, "link", "set", ifB, "up"},
	}
	for _, s := range steps {
		if err := IP(s...); err != nil {
			return err
		}
	}
	return nil
}

// Do runs f on an OS thread that has entered namespace name, then returns
// the thread to the original namespace. Sockets and TUN devices f creates
// belong to the namespace for life, whichever thread later uses them.
func Do(name string, f func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + name)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", name, err)
	}
	ferr := f()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime destroys it when this
		// goroutine exits instead of reusing it in the wrong namespace.
		return fmt.Errorf("setns back from %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// TCPBuffers sets the ceiling of TCP's buffer autotuning (the third field
// of net.ipv4.tcp_rmem and tcp_wmem, both per namespace) in namespace
// name, keeping the minimum and default it has. The stock 4 MiB send
// ceiling holds one flow near 0.5 Gbit/s over a 50 ms round trip, since
// a sender keeps every unacknowledged byte, so benchmarks over emulated
// long paths raise it as a host tuned for such a path would.
func TCPBuffers(name string, ceiling int) error {
	for _, key := range []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"} {
		out, err := exec.Command("ip", "netns", "exec", name, "sysctl", "-n", key).CombinedOutput()
		f := strings.Fields(string(out))
		if err != nil || len(f) != 3 {
			return fmt.Errorf("%s in %s: %q, %v", key, name, strings.TrimSpace(string(out)), err)
		}
		args := []string{"netns", "exec", name, "sysctl", "-q", "-w", fmt.Sprintf("%s=%s %s %d", key, f[0], f[1], ceiling)}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
