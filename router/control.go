package router

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// RunDir holds the routers' control sockets (the systemd unit's
// RuntimeDirectory).
const RunDir = "/run/yip-router"

// SocketPath is the control socket of the router on interface name.
func SocketPath(name string) string { return filepath.Join(RunDir, name+".sock") }

// ServeControl answers `show` on a Unix socket at path (mode 0600: status
// names peers and endpoints). One JSON request line, one JSON reply.
func (r *Router) ServeControl(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	_ = os.Remove(path) // a stale socket of a crashed router
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return err
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

// Sockets lists the control sockets of running routers.
func Sockets() ([]string, error) {
	return filepath.Glob(filepath.Join(RunDir, "*.sock"))
}
