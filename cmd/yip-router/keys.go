package main

import (
	"bufio"
	"fmt"
	"io"

	"github.com/yip-router/yip-router/crypto"
)

func runGenkey(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "yip-router genkey: takes no arguments")
		return 2
	}
	k, err := crypto.GeneratePrivateKey()
	if err != nil {
		fmt.Fprintln(stderr, "yip-router genkey:", err)
		return 1
	}
	fmt.Fprintln(stdout, k)
	return 0
}

func runGenpsk(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "yip-router genpsk: takes no arguments")
		return 2
	}
	k, err := crypto.GeneratePresharedKey()
	if err != nil {
		fmt.Fprintln(stderr, "yip-router genpsk:", err)
		return 1
	}
	fmt.Fprintln(stdout, k)
	return 0
}

// runPubkey reads one private key line from stdin, like `wg pubkey`.
func runPubkey(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "yip-router pubkey: takes no arguments; pipe the private key to stdin")
		return 2
	}
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
