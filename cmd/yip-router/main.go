// Command yip-router is the one binary of the project: the router (up),
// its status (show), key tools and the demo.
//
// The commands are a spf13/cobra tree (newRoot), so the help, the shell
// completions (the hidden `completion bash|zsh|fish`) and the man pages
// (man.go, through cobra/doc) come from one definition of every command
// and flag: a library that generates all three, where the command table
// this replaced would have needed a roff writer and three completion
// scripts of our own. Before cobra each command parsed a Go flag set of
// its own, which accepts a long flag with one dash (-shards 2, -json);
// singleDash keeps that spelling working.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/buildinfo"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run runs the command line args and returns the exit status: the
// command's own (0, or 1 when it failed), 2 for a usage error.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(singleDash(root, args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	}
	// Cobra's errors: an unknown command or flag, a flag's value.
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	fmt.Fprint(stderr, cmd.UsageString())
	return 2
}

// exitStatus is a command's non-zero exit status, as its RunE returns it.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// exit turns a command's exit status into what its RunE returns.
func exit(code int) error {
	if code == 0 {
		return nil
	}
	return exitStatus(code)
}

// writeHelp writes c's usage line, with help its description, then its
// commands and its flags. --help is hidden, so a command without flags of
// its own has no flags section. Functions, not cobra's templates:
// text/template would keep every exported method in the binary (cobra
// PR 1956).
func writeHelp(w io.Writer, c *cobra.Command, help bool) {
	fmt.Fprintf(w, "usage: %s\n", c.UseLine())
	if help {
		long := c.Long
		if long == "" {
			long = c.Short
		}
		fmt.Fprintf(w, "\n%s\n", long)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprint(w, "\ncommands:\n")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %-22s   %s\n", sub.Use, sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(w, "\nflags:\n%s", c.LocalFlags().FlagUsages())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n'%s COMMAND --help' prints a command's flags.\n", c.CommandPath())
	}
}

// extraCommands are the commands of tagged builds (man.go).
var extraCommands []func() *cobra.Command

// newRoot is the command tree: every command, its flags and their help.
func newRoot() *cobra.Command {
	cobra.EnableCommandSorting = false // in the order added: up first
	var version bool
	root := &cobra.Command{
		Use:   "yip-router COMMAND [ARGUMENTS]",
		Short: "sharded userspace VPN router",
		Long: `yip-router is a multi-core, sharded, userspace VPN router for Linux gateways.
It carries IP packets between gateways over UDP, sealed after a Noise IK
handshake and protected against loss by cross-packet Reed-Solomon FEC, one
shard per core. Both ends of a tunnel must run yip-router: it reads
WireGuard-style keys and config files but does not speak WireGuard's wire
protocol.

The systemd unit yip-router@NAME runs up on /etc/yip-router/NAME.conf. The
documents named here (CONFIG.md, SHOW.md, ...) are in the source's docs/
and, from the package, in /usr/share/doc/yip-router/.`,
		Example: `  yip-router genkey | tee private.key | yip-router pubkey > public.key
  yip-router check -c /etc/yip-router/wg0.conf
  systemctl enable --now yip-router@wg0     # yip-router up -c /etc/yip-router/wg0.conf --name wg0
  yip-router show`,
		// The usage on a bare `yip-router` is an error (exit 2); --version
		// is the root's one flag.
		RunE: func(cmd *cobra.Command, args []string) error {
			if version {
				fmt.Fprintln(cmd.OutOrStdout(), versionLine())
				return nil
			}
			fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
			return exit(2)
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.Flags().BoolVar(&version, "version", false, "print the version (as the version command does)")
	root.AddCommand(upCmd(), showCmd(), checkCmd(), genkeyCmd(), pubkeyCmd(), genpskCmd(), versionCmd(), demoCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	// completion bash|zsh|fish prints a script for the shell; make deb
	// installs them.
	root.CompletionOptions.HiddenDefaultCmd = true
	for _, c := range append(root.Commands(), root) {
		c.DisableFlagsInUseLine = true
		c.Flags().SortFlags = false // as each command lists them
		c.Flags().BoolP("help", "h", false, "help for "+c.Name())
		_ = c.Flags().MarkHidden("help")
	}
	root.SetUsageFunc(func(c *cobra.Command) error {
		writeHelp(c.OutOrStderr(), c, false)
		return nil
	})
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { writeHelp(c.OutOrStdout(), c, true) })
	return root
}

// singleDash rewrites a long flag spelled with one dash (-shards 2,
// -json, -log-level=debug), as Go's flag package accepted it, to the
// two dashes pflag reads. Shorthands (-c FILE, -i IFACE) and flag values
// stay as they are, and so does everything after "--".
func singleDash(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil {
		return args
	}
	fs := cmd.Flags()
	out := make([]string, 0, len(args))
	value := false // args[i] is the value of the flag before it
	for i, a := range args {
		if value || a == "--" {
			if !value {
				return append(out, args[i:]...)
			}
			value = false
			out = append(out, a)
			continue
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if f == nil && len(name) == 1 {
			f = fs.ShorthandLookup(name)
		}
		if f != nil && !strings.HasPrefix(a, "--") && len(name) > 1 {
			a = "-" + a
		}
		value = f != nil && !hasValue && f.NoOptDefVal == ""
		out = append(out, a)
	}
	return out
}

// noArgs refuses arguments (cobra.NoArgs calls one an unknown command).
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("takes no arguments (got %q)", args)
	}
	return nil
}

// fixedCompletions completes a flag's value from a fixed list.
func fixedCompletions(values ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version (also --version)",
		Long: `Print the build's version (git describe), the wire version both ends
of a tunnel must share, and the Go release it was built with.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine is what `version` prints: the build, the wire version (the
// framing both ends must share) and the Go release.
func versionLine() string {
	return fmt.Sprintf("yip-router %s (wire version %d, %s)", buildinfo.Version(), crypto.WireVersion, buildinfo.Go())
}
