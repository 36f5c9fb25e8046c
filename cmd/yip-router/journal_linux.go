package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"
)

// Under systemd the router's stderr is a stream to the journal, which
// reads a "<N>" at the start of a line as its syslog priority
// (SyslogLevelPrefix=, on by default): with it, `journalctl -p warning`
// shows the router's warnings and errors, and nothing else.

// toJournal reports whether w is the stream systemd connected to the
// journal: $JOURNAL_STREAM names its device and inode.
func toJournal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var dev, ino uint64
	if _, err := fmt.Sscanf(os.Getenv("JOURNAL_STREAM"), "%d:%d", &dev, &ino); err != nil {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	return uint64(st.Dev) == dev && st.Ino == ino
}

// priorityCore writes each entry as its encoder makes it, after the
// syslog priority of its level.
type priorityCore struct {
	zapcore.LevelEnabler
	enc zapcore.Encoder
	out zapcore.WriteSyncer
}

func (c *priorityCore) With(fields []zapcore.Field) zapcore.Core {
	enc := c.enc.Clone()
	for _, f := range fields {
		f.AddTo(enc)
	}
	return &priorityCore{c.LevelEnabler, enc, c.out}
}

func (c *priorityCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *priorityCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	buf, err := c.enc.EncodeEntry(e, fields)
	if err != nil {
		return err
	}
	defer buf.Free()
	// Every line of the entry gets the prefix: the journal reads it per
	// line, and a multi-line message (the configuration's errors, one a
	// line) would otherwise go in at the default priority after its first.
	prefix := []byte(fmt.Sprintf("<%d>", syslogPriority(e.Level)))
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	out := append(append([]byte(nil), prefix...), bytes.ReplaceAll(body, []byte("\n"), append([]byte("\n"), prefix...))...)
	_, err = c.out.Write(append(out, '\n'))
	return err
}

func (c *priorityCore) Sync() error { return c.out.Sync() }

// syslogPriority maps a level to syslog's (sd-daemon.h's SD_ERR etc.).
func syslogPriority(l zapcore.Level) int {
	switch {
	case l >= zapcore.DPanicLevel:
		return 2 // critical
	case l >= zapcore.ErrorLevel:
		return 3
	case l >= zapcore.WarnLevel:
		return 4
	case l >= zapcore.InfoLevel:
		return 6
	}
	return 7 // debug
}
