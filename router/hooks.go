package router

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"go.uber.org/zap"
)

// hookShell runs each hook command, as sh -c COMMAND (wg-quick runs them
// in bash).
const hookShell = "/bin/sh"

// hookPipeWait is how long a finished hook's output is still read: a
// command that leaves a process in the background holding its output
// open (PostUp = some-daemon &) must not hold up the router.
const hookPipeWait = time.Second

// runHooks runs one stage's commands (PreUp, PostUp, PreDown, PostDown)
// in order, each with %i replaced by the interface's name, logging each
// command and every line it writes. Up stages stop at the first failure
// and return it, as wg-quick does; down stages (keepGoing) log a failure
// and go on, so that a shutdown still does all the undoing it can.
func runHooks(log *zap.Logger, stage string, cmds []string, ifname string, keepGoing bool) error {
	for _, c := range cmds {
		c = strings.ReplaceAll(c, "%i", ifname)
		log.Info("running "+stage, zap.String("command", c))
		err := runHook(log, stage, c)
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s command %q: %w", stage, c, err)
		if !keepGoing {
			return err
		}
		log.Warn("hook failed", zap.Error(err))
	}
	return nil
}

// runHook runs one command with the router's environment and no input;
// what it writes to stdout and stderr goes to the log, a line at a time.
func runHook(log *zap.Logger, stage, c string) error {
	out := &lineLog{log: log, stage: stage}
	cmd := exec.Command(hookShell, "-c", c)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = hookPipeWait
	err := cmd.Run()
	out.flush()
	if errors.Is(err, exec.ErrWaitDelay) {
		// It succeeded; what it left running keeps the output.
		log.Info(stage+" command left a process running with its output open; that output is not logged", zap.String("command", c))
		return nil
	}
	return err
}

// lineLog logs what a hook writes, a line per log entry. It is both
// Stdout and Stderr of the command, and os/exec then calls Write from one
// goroutine at a time.
type lineLog struct {
	log   *zap.Logger
	stage string
	buf   []byte
}

func (w *lineLog) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 { // a long line without an end
		w.flush()
	}
	return len(p), nil
}

func (w *lineLog) flush() {
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = nil
	}
}

func (w *lineLog) line(b []byte) {
	w.log.Info(w.stage+" output", zap.String("line", strings.TrimRight(string(b), "\r")))
}
