package router

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Hooks run in order through sh -c with %i replaced, their output is
// logged a line at a time; an up stage stops at the first failure and
// names it, a down stage logs it and goes on.
func TestRunHooks(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(core)

	err := runHooks(log, "PostUp", []string{
		"echo first %i >> " + out,
		"echo 'to stdout'; echo 'to stderr' >&2; printf 'no newline'",
		"echo a%ib%i >> " + out + "; exit 3",
		"echo never >> " + out,
	}, "yip7", false)
	if err == nil || !strings.Contains(err.Error(), `PostUp command "echo ayip7byip7 >> `) || !strings.HasSuffix(err.Error(), "exit status 3") {
		t.Fatalf("failing PostUp: %v", err)
	}
	b, _ := os.ReadFile(out)
	if string(b) != "first yip7\nayip7byip7\n" {
		t.Fatalf("commands ran as %q", b)
	}
	var lines []string
	for _, e := range logs.FilterMessage("PostUp output").All() {
		lines = append(lines, e.ContextMap()["line"].(string))
	}
	if !slices.Equal(lines, []string{"to stdout", "to stderr", "no newline"}) {
		t.Errorf("output logged as %q", lines)
	}
	if n := logs.FilterMessage("running PostUp").Len(); n != 3 {
		t.Errorf("%d commands logged as run, want 3", n)
	}

	os.Remove(out)
	if err := runHooks(log, "PostDown", []string{"false", "echo after %i >> " + out}, "yip7", true); err != nil {
		t.Fatalf("down stage returned %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "after yip7\n" {
		t.Errorf("the command after a failed PostDown: %q", b)
	}
	if w := logs.FilterMessage("hook failed").All(); len(w) != 1 || w[0].Level != zap.WarnLevel {
		t.Errorf("failed PostDown logged as %v", w)
	}
}

// A command that leaves a process in the background holding its output
// does not hold up the router.
func TestRunHooksBackground(t *testing.T) {
	done := make(chan error, 1)
	go func() { done <- runHooks(zap.NewNop(), "PostUp", []string{"sleep 5 & echo started"}, "yip0", false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("a background process held the hook")
	}
}
