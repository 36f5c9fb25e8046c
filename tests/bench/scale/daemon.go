package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// daemon is a hub's process (yip-router's or wireguard-go's) with its log
// file: started, read and stopped alike for both.
type daemon struct {
	argv    []string
	cmd     *exec.Cmd
	logPath string
	logf    *os.File
	exited  chan struct{} // closed when the process has exited
}

// start runs argv with env added to the environment, its output going to
// a new log at logPath.
func (d *daemon) start(argv []string, logPath string, env ...string) error {
	d.argv, d.logPath, d.exited = argv, logPath, make(chan struct{})
	var err error
	if d.logf, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
		return err
	}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	if len(env) > 0 {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.logf, d.logf
	if err := d.cmd.Start(); err != nil {
		d.logf.Close()
		return err
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	return nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

func (d *daemon) argvString() string { return strings.Join(d.argv, " ") }

// stop sends SIGTERM, then SIGKILL after 15 s.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.logf.Close()
}
