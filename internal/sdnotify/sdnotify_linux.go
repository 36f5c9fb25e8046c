// Package sdnotify tells systemd how a Type=notify service is doing: the
// sd_notify protocol, one datagram of NAME=VALUE lines to the Unix socket
// named by $NOTIFY_SOCKET. It is these few lines rather than go-systemd's
// daemon package, which would add a dependency for them.
package sdnotify

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Send sends state to the service manager. It reports false, and no
// error, when the process does not run under one that listens
// ($NOTIFY_SOCKET unset).
func Send(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // an abstract socket
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sd_notify: %w", err)
	}
	return true, nil
}

// Ready: start-up is complete (the interface, its routes and the sockets
// are up); units ordered after this one may start.
func Ready() (bool, error) { return Send("READY=1") }

// Reloading: the service re-reads its configuration; Ready follows when
// it is done. MONOTONIC_USEC is the time of the request, which systemd
// (253 and later) uses to match the reload it asked for.
func Reloading() (bool, error) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return Send(fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/1000))
}

// Stopping: the service is shutting down.
func Stopping() (bool, error) { return Send("STOPPING=1") }
