package main

import (
	"strings"
	"sync/atomic"
	"testing"
)

// The same debug or info message repeated within a second is sampled (a
// hub's burst of new sessions writes a bounded number of lines); other
// messages still get through, each to its own first logFirst; warnings
// and errors all do; every line left out is counted.
func TestLoggerSamplesRepeats(t *testing.T) {
	var out strings.Builder
	var left atomic.Uint64
	log, err := newLogger("info", "console", &out, &left)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5 * logFirst
	for range n {
		log.Info("session established")
	}
	for range n {
		log.Warn("endpoint does not resolve")
	}
	log.Info("something else")
	got := strings.Count(out.String(), "session established")
	want := logFirst + (n-logFirst)/logThereafter
	// A second's boundary inside the loop restarts the count once.
	if got < want || got > 2*want {
		t.Fatalf("%d lines of one message repeated %d times at once, want %d (%d across a second's boundary)", got, n, want, 2*want)
	}
	if got+int(left.Load()) != n {
		t.Fatalf("%d lines written and %d counted as left out, of %d", got, left.Load(), n)
	}
	if !strings.Contains(out.String(), "something else") {
		t.Fatal("a different message was sampled away")
	}
	if w := strings.Count(out.String(), "endpoint does not resolve"); w != n {
		t.Fatalf("%d of %d warnings written: warnings are never sampled", w, n)
	}
	// The level still filters: at warn, no info line at all.
	out.Reset()
	if log, err = newLogger("warn", "console", &out, nil); err != nil {
		t.Fatal(err)
	}
	log.Info("quiet")
	log.Error("loud")
	if s := out.String(); strings.Contains(s, "quiet") || !strings.Contains(s, "loud") {
		t.Fatalf("at level warn: %q", s)
	}
}
