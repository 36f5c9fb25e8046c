package main

import (
	"strings"
	"testing"
)

// The same message repeated within a second is sampled (a hub's burst of
// new sessions writes a bounded number of lines); other messages still
// get through, each to its own first logFirst.
func TestLoggerSamplesRepeats(t *testing.T) {
	var out strings.Builder
	log, err := newLogger("info", "console", &out)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5 * logFirst
	for range n {
		log.Info("session established")
	}
	log.Warn("something else")
	got := strings.Count(out.String(), "session established")
	want := logFirst + (n-logFirst)/logThereafter
	// A second's boundary inside the loop restarts the count once.
	if got < want || got > 2*want {
		t.Fatalf("%d lines of one message repeated %d times at once, want %d (%d across a second's boundary)", got, n, want, 2*want)
	}
	if !strings.Contains(out.String(), "something else") {
		t.Fatal("a different message was sampled away")
	}
}
