package router

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// RunDir holds the routers' control sockets (the systemd unit's
// RuntimeDirectory).
const RunDir = "/run/yip-router"

// SocketPath is the control socket of the router on interface name in this
// process's network namespace. Interface names are per namespace, /run is
// not, so outside the namespace of PID 1 the path carries the namespace's
// inode ("yip0:net4026532281.sock", ':' cannot occur in an interface name):
// two routers in two namespaces may both be yip0.
func SocketPath(name string) string {
	if id := netnsID(); id != 0 {
		return filepath.Join(RunDir, name+":net"+strconv.FormatUint(id, 10)+".sock")
	}
	return filepath.Join(RunDir, name+".sock")
}

// netnsID is the inode of this thread's network namespace, or 0 when it is
// PID 1's. When PID 1's namespace cannot be read (a sandbox), the inode is
// returned: a longer name is better than a shared one.
func netnsID() uint64 {
	var self, init unix.Stat_t
	if unix.Stat("/proc/thread-self/ns/net", &self) != nil {
		return 0
	}
	if unix.Stat("/proc/1/ns/net", &init) == nil && self.Ino == init.Ino && self.Dev == init.Dev {
		return 0
	}
	return self.Ino
}

// FindSocket is the control socket of the router on interface name: the one
// of this namespace if it exists, else the only router of that name in some
// other namespace (so `show -i` from the host finds a namespaced router).
func FindSocket(name string) string {
	p := SocketPath(name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if m, _ := filepath.Glob(filepath.Join(RunDir, name+":net*.sock")); len(m) == 1 {
		return m[0]
	}
	return p
}

// ServeControl answers `show` on a Unix socket at path (mode 0600: status
// names peers and endpoints). One JSON request line, one JSON reply. It
// refuses to take over the socket of a router that still answers on it.
func (r *Router) ServeControl(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another yip-router is running on it", path)
	}
	_ = os.Remove(path) // a stale socket of a crashed router
	// Created 0600 (umask), not chmodded after: there is no moment when
	// others may connect.
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		<-r.stop
		ln.Close()
		os.Remove(path)
	}()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serveConn(c)
		}
	}()
	return nil
}

type controlRequest struct {
	Op string `json:"op"`
}

func (r *Router) serveConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	var req controlRequest
	if err := json.Unmarshal([]byte(line), &req); err != nil {
		_ = json.NewEncoder(c).Encode(map[string]string{"error": "bad request"})
		return
	}
	switch req.Op {
	case "status":
		_ = json.NewEncoder(c).Encode(r.Status())
	default:
		_ = json.NewEncoder(c).Encode(map[string]string{"error": "unknown op " + req.Op})
	}
	r.log.Debug("control request", zap.String("op", req.Op))
}

// QueryStatus asks the router behind socket path for its status.
func QueryStatus(path string) (*Status, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file") {
			return nil, fmt.Errorf("no router is running on %s (is yip-router up running? are you root?)", path)
		}
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(`{"op":"status"}` + "\n")); err != nil {
		return nil, err
	}
	var st Status
	dec := json.NewDecoder(c)
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("reading status from %s: %w", path, err)
	}
	return &st, nil
}

// Sockets lists the control sockets of the routers running in this
// process's network namespace (SocketPath's names), or with all, in every
// namespace: two namespaces may each run a yip0, and `show` in one of
// them means its own.
func Sockets(all bool) ([]string, error) {
	var self unix.Stat_t
	_ = unix.Stat("/proc/thread-self/ns/net", &self)
	return socketsIn(RunDir, self.Ino, netnsID() == 0, all)
}

// socketsIn is Sockets for the sockets in dir of the namespace whose inode
// is self (init: it is PID 1's). A router names its socket after its
// namespace's inode whenever it cannot tell it is PID 1's (a systemd unit
// without CAP_SYS_PTRACE cannot read /proc/1/ns/net), so a suffix of our
// own inode is ours in every namespace, and a bare name is ours in PID 1's.
func socketsIn(dir string, self uint64, init, all bool) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil || all {
		return paths, err
	}
	own := ":net" + strconv.FormatUint(self, 10)
	var mine []string
	for _, p := range paths {
		base := strings.TrimSuffix(filepath.Base(p), ".sock")
		if i := strings.IndexByte(base, ':'); (i < 0 && init) || (i >= 0 && base[i:] == own) {
			mine = append(mine, p)
		}
	}
	return mine, nil
}
