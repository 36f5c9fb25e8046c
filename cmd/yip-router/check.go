package main

import (
	"fmt"
	"io"

	"github.com/yip-router/yip-router/internal/hostcheck"
)

// runCheck validates a config without starting anything and inspects the
// host for what would make the router fail or run slowly. Exit status 1 on
// ERROR findings only (warnings are advice), 2 on usage errors.
func runCheck(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	return check(args, hostcheck.Real(), stdout, stderr)
}

func check(args []string, env hostcheck.Env, stdout, stderr io.Writer) int {
	fs := flagSet("check", stderr)
	conf := fs.String("c", "", "configuration file (required)")
	shards := fs.String("shards", "", "auto or N, as for up (default: the config's Shards)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *conf == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: yip-router check -c FILE [--shards auto|N]")
		return 2
	}
	s, err := shardsFlag(*shards)
	if err != nil {
		fmt.Fprintln(stderr, "yip-router check:", err)
		return 2
	}
	findings := hostcheck.Check(*conf, env, hostcheck.Options{Shards: s})
	for _, f := range findings {
		fmt.Fprintln(stdout, f)
	}
	errs, warns := hostcheck.Counts(findings)
	fmt.Fprintf(stdout, "\n%d error(s), %d warning(s)", errs, warns)
	if errs == 0 && warns == 0 {
		fmt.Fprint(stdout, ": ready")
	}
	fmt.Fprintf(stdout, " (for the sysctl details: %s check)\n", env.TuneCmd())
	if errs > 0 {
		return 1
	}
	return 0
}
