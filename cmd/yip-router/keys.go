package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/yip-router/yip-router/crypto"
)

func genkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genkey",
		Short: "print a new private key (base64)",
		Long: `Print a new random Curve25519 private key in WireGuard's text form
(base64 of 32 bytes), for PrivateKey or PrivateKeyFile.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(runGenkey(cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}

func genpskCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genpsk",
		Short: "print a new preshared key (base64)",
		Long: `Print a new random 32-byte preshared key in base64, for the
PresharedKey of a [Peer] at both ends.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(runGenpsk(cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}

func pubkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pubkey < private.key",
		Short: "print the public key of the private key on stdin",
		Long: `Read a private key (one line of base64) from stdin, like wg pubkey,
and print its public key.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(runPubkey(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
}

func runGenkey(stdout, stderr io.Writer) int {
	k, err := crypto.GeneratePrivateKey()
	if err != nil {
		fmt.Fprintln(stderr, "yip-router genkey:", err)
		return 1
	}
	fmt.Fprintln(stdout, k)
	return 0
}

func runGenpsk(stdout, stderr io.Writer) int {
	k, err := crypto.GeneratePresharedKey()
	if err != nil {
		fmt.Fprintln(stderr, "yip-router genpsk:", err)
		return 1
	}
	fmt.Fprintln(stdout, k)
	return 0
}

// runPubkey reads one private key line from stdin, like `wg pubkey`.
func runPubkey(stdin io.Reader, stdout, stderr io.Writer) int {
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintln(stderr, "yip-router pubkey: reading stdin:", err)
		return 1
	}
	k, err := crypto.ParsePrivateKey(line)
	if err != nil {
		fmt.Fprintln(stderr, "yip-router pubkey: stdin:", err)
		return 1
	}
	fmt.Fprintln(stdout, k.Public())
	return 0
}
