// Key files: the readKey step, which reads the PrivateKeyFile the parse
// step found, and ExposedSecretFiles, which checks who may read the files
// that hold keys.

package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/yip-router/yip-router/crypto"
)

// readKey reads and parses the PrivateKeyFile, if the config names one,
// with read; a relative path is taken relative to dir ("" = the current
// directory). Problems are reported at the PrivateKeyFile line.
func (p *parser) readKey(dir string, read keyReader) {
	if p.keyPath == "" {
		return
	}
	bad := func(format string, args ...any) {
		p.errorf(p.keyLine, secInterface, "PrivateKeyFile", format, args...)
	}
	path := p.keyPath
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	b, err := read(path)
	if err != nil {
		bad("%q: %s", path, pathErr(err))
		return
	}
	p.keys.files = append(p.keys.files, path)
	k, err := crypto.ParsePrivateKey(string(b))
	if err != nil {
		bad("%q: %v", path, err)
		return
	}
	p.iface.PrivateKey, p.privOK = k, true
}

// readKeyFile reads a PrivateKeyFile: a regular file of at most maxKeyFile
// bytes.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes; want just the base64 key", maxKeyFile)
	}
	return b, nil
}

// pathErr drops the path from an *fs.PathError (messages name it already).
func pathErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// ExposedSecretFiles names the SecretFiles that group or others may read or
// write, with their mode: a key readable by others is a key that is no
// longer secret.
func (c *Config) ExposedSecretFiles() []string {
	var out []string
	for _, f := range c.SecretFiles {
		fi, err := os.Stat(f)
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			out = append(out, fmt.Sprintf("%s (mode %04o)", f, fi.Mode().Perm()))
		}
	}
	return out
}

// WritableHookFile describes the config file when it holds hook commands
// (PreUp, PostUp, PreDown, PostDown) and someone other than this process's
// user and root may change it: group or others may write it, or another
// user owns it. Whoever can change the file runs commands as the router's
// user. "" when neither holds.
func (c *Config) WritableHookFile() string {
	if c.Path == "" || c.Interface.Hooks.Empty() {
		return ""
	}
	fi, err := os.Stat(c.Path)
	if err != nil {
		return ""
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("%s (mode %04o) is writable by group or others", c.Path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("%s is owned by uid %d", c.Path, st.Uid)
	}
	return ""
}
