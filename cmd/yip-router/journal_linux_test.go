package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// stamp is an ISO 8601 time as zap writes it.
var stamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:`)

// Under systemd (stderr is the stream $JOURNAL_STREAM names) every log line
// starts with its syslog priority and carries no time stamp of its own;
// elsewhere lines are as before.
func TestJournalPriorities(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"console", "json"} {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			t.Fatal(err)
		}
		t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
		log, err := newLogger("debug", format, f, nil)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("d")
		log.Info("i")
		log.Warn("w")
		log.Error("e")
		n := 4
		if format == "console" {
			log.Error("configuration errors:\nf.conf:3: one\nf.conf:4: two")
			n += 3
		}
		b, _ := os.ReadFile(f.Name())
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != n {
			t.Fatalf("%s: %d lines: %q", format, len(lines), b)
		}
		for i, want := range []string{"<7>", "<6>", "<4>", "<3>", "<3>", "<3>", "<3>"}[:n] {
			// The journal stamps console lines; JSON keeps its "ts".
			if !strings.HasPrefix(lines[i], want) || stamp.MatchString(lines[i]) != (format == "json") {
				t.Errorf("%s: line %q, want %s first, a time stamp only in JSON", format, lines[i], want)
			}
		}
	}
	// Not the journal's stream: no prefix.
	t.Setenv("JOURNAL_STREAM", "1:1")
	g, err := os.Create(filepath.Join(t.TempDir(), "plain"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	log, err := newLogger("info", "console", g, nil)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("w")
	if b, _ := os.ReadFile(g.Name()); strings.HasPrefix(string(b), "<") {
		t.Fatalf("a prefix outside the journal: %q", b)
	}
}

// A start that fails reports it through the log, in the chosen format: a
// pipeline reading JSON gets JSON to the end, not a plain line after it.
func TestUpFailureInLogFormat(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(conf, []byte("[Interface]\nListenPort = banana\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := run([]string{"up", "-c", conf, "--log-format", "json"}, nil, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %q", code, errb.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Fatalf("a line that is not JSON: %q", line)
		}
	}
	if !strings.Contains(errb.String(), `"level":"error"`) || !strings.Contains(errb.String(), "ListenPort") {
		t.Fatalf("no JSON error naming the key: %q", errb.String())
	}
}
