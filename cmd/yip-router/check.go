package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/yip-router/yip-router/internal/hostcheck"
)

func checkCmd() *cobra.Command {
	var conf, shards string
	cmd := &cobra.Command{
		Use:   "check -c FILE [--shards auto|N]",
		Short: "validate the config and inspect the host",
		Long: `Validate the configuration file FILE without starting anything and inspect
the host for what would make the router fail or run slowly: privileges, the
TUN device, CPUs and shards, socket buffers, forwarding, the underlay's MTU,
offloads, the listen port and the metrics listener: one OK, INFO, WARN or
ERROR line per finding. Exit status 1 when there is an ERROR (warnings are
advice), 2 on usage errors.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(check(conf, shards, hostcheck.Real(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cmd.Flags().StringVarP(&conf, "config", "c", "", "configuration `FILE` (required)")
	cmd.Flags().StringVar(&shards, "shards", "", "`auto|N`, as for up (default: the config's Shards)")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagFilename("config", "conf")
	_ = cmd.RegisterFlagCompletionFunc("shards", fixedCompletions("auto"))
	return cmd
}

// check validates a config and inspects the host (env): exit status 1 on
// ERROR findings only, 2 on usage errors.
func check(conf, shards string, env hostcheck.Env, stdout, stderr io.Writer) int {
	s, err := shardsFlag(shards)
	if err != nil {
		fmt.Fprintln(stderr, "yip-router check:", err)
		return 2
	}
	findings := hostcheck.Check(conf, env, hostcheck.Options{Shards: s})
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
