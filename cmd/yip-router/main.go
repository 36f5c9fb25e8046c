// Command yip-router is the one binary of the project: the router (up),
// its status (show), key tools and the demo.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/buildinfo"
)

type command struct {
	name  string
	usage string
	run   func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
	// flags: run parses flags with a flagSet, so `-h` lists them.
	flags bool
}

func commands() []command {
	return []command{
		{"up", "up -c FILE [--shards auto|N] [--log-level L] [--log-format console|json]   run the router", runUp, true},
		{"show", "show [IFACE | all] [--json | --dump | --watch] [-i IFACE | --socket PATH] [peers|endpoints|transfer|latest-handshakes|allowed-ips|dump]   status of running routers", runShow, true},
		{"check", "check -c FILE [--shards auto|N]   validate the config and inspect the host", runCheck, true},
		{"genkey", "genkey                 print a new private key (base64)", runGenkey, false},
		{"pubkey", "pubkey < private.key   print the public key of the private key on stdin", runPubkey, false},
		{"genpsk", "genpsk                 print a new preshared key (base64)", runGenpsk, false},
		{"version", "version                print the version (also --version)", runVersion, false},
		{"demo", "demo [--shards N] [--mb M] [--fec MODE]   two routers in two namespaces, traffic, a report (root)", runDemo, true},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: yip-router <command> [arguments]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands() {
		fmt.Fprintln(w, "  "+c.usage)
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "--version":
		return runVersion(args[1:], stdin, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			for _, a := range args[1:] {
				if a == "-h" || a == "--help" {
					fmt.Fprintln(stdout, "usage: yip-router "+c.usage)
					if c.flags {
						// The command's flag set lists its flags
						// (to stdout: it is what was asked for).
						fmt.Fprintln(stdout, "\nflags:")
						c.run([]string{"-h"}, stdin, stdout, stdout)
					}
					return 0
				}
			}
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "yip-router: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// flagSet is a subcommand's flag set: errors to stderr, and on -h only the
// flags with their defaults (run prints the usage line before them).
func flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = fs.PrintDefaults
	return fs
}

func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "yip-router version: takes no arguments")
		return 2
	}
	fmt.Fprintln(stdout, versionLine())
	return 0
}

// versionLine is what `version` prints: the build, the wire version (the
// framing both ends must share) and the Go release.
func versionLine() string {
	return fmt.Sprintf("yip-router %s (wire version %d, %s)", buildinfo.Version(), crypto.WireVersion, buildinfo.Go())
}
