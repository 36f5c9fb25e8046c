// Package config reads yip-router's config file: WireGuard-style INI. The
// reference for every key, the MTU rule and the error format is
// docs/CONFIG.md; keep the two in step.
//
// Reading a config takes five steps, each in its own file: parse (parse.go,
// values.go, check.go) turns the text into a parser value without any I/O;
// readKey (keys.go) reads the PrivateKeyFile it names; tableNames
// (tables.go) looks a Table name up in rt_tables; resolve (resolve.go)
// looks up the Endpoint host names; finish (check.go) runs the checks that
// need the private key and returns the Config or every problem found. Load
// and Parse run them all.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Load reads and parses the config file at path. A relative
// PrivateKeyFile is taken relative to the directory of path.
func Load(path string) (*Config, error) {
	fail := func(msg string) (*Config, error) {
		return nil, errors.Join(&Error{File: path, Msg: oneLine(msg)})
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(pathErr(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fail("is a directory, not a config file")
	}
	c, src, err := read(path, f, options{dir: filepath.Dir(path)})
	if err != nil {
		return nil, err
	}
	c.Path = path
	c.SecretFiles = src.files
	if src.inline {
		c.SecretFiles = append(c.SecretFiles, path)
	}
	return c, nil
}

// Parse parses a config from r; name is used in error messages. A
// relative PrivateKeyFile is taken relative to the current directory.
// Endpoint host names are resolved with net.DefaultResolver.
func Parse(name string, r io.Reader) (*Config, error) {
	c, _, err := read(name, r, options{})
	return c, err
}

// options are the outside dependencies of the I/O steps, replaceable in
// tests and fuzzing.
type options struct {
	dir     string       // base of a relative PrivateKeyFile; "" = current directory
	lookup  Lookup       // nil = net.DefaultResolver
	readKey keyReader    // nil = readKeyFile
	tables  tablesReader // nil = readRTTables
}

// keyReader returns the contents of a PrivateKeyFile.
type keyReader func(path string) ([]byte, error)

// read reads the text from r and runs every step on it. The steps after
// parse run even when it found problems, so that one run reports them all.
func read(name string, r io.Reader, opt options) (*Config, keySources, error) {
	data, err := readText(name, r)
	if err != nil {
		return nil, keySources{}, err
	}
	return build(name, data, opt)
}

// build runs the steps on the text of a config file.
func build(name string, data []byte, opt options) (*Config, keySources, error) {
	if opt.readKey == nil {
		opt.readKey = readKeyFile
	}
	if opt.lookup == nil {
		opt.lookup = DefaultLookup
	}
	if opt.tables == nil {
		opt.tables = readRTTables
	}
	p := parse(name, data)
	p.readKey(opt.dir, opt.readKey)
	p.tableNames(opt.tables)
	p.resolve(opt.lookup)
	c, err := p.finish()
	if err != nil {
		return nil, keySources{}, err
	}
	return c, p.keys, nil
}

// readText reads a whole config file of at most maxFileSize bytes.
func readText(name string, r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, errors.Join(&Error{File: name, Msg: oneLine("read: " + err.Error())})
	}
	if len(data) > maxFileSize {
		line := bytes.Count(data[:maxFileSize], []byte{'\n'}) + 1
		return nil, errors.Join(&Error{File: name, Line: line,
			Msg: fmt.Sprintf("file is larger than 1 MiB (%d bytes)", maxFileSize)})
	}
	return data, nil
}
