// Routing table names: the tables step, which looks up a Table given by a
// name other than iproute2's built-in ones in rt_tables, as ip does.

package config

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tablesReader returns the routing table names the host knows, by name.
type tablesReader func() (map[string]uint32, error)

// rtTablesDirs are where iproute2 keeps rt_tables: /etc first, the
// distribution's defaults when /etc has none (iproute2 6.5 and later
// ship them in /usr/share), and rt_tables.d/*.conf of both.
var rtTablesDirs = []string{"/etc/iproute2", "/usr/share/iproute2", "/usr/lib/iproute2"}

// readRTTables reads the host's table names as ip does.
func readRTTables() (map[string]uint32, error) {
	names := map[string]uint32{}
	found := false
	for _, dir := range rtTablesDirs {
		b, err := os.ReadFile(filepath.Join(dir, "rt_tables"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		parseRTTables(b, names)
		found = true
		break
	}
	for _, dir := range rtTablesDirs {
		confs, _ := filepath.Glob(filepath.Join(dir, "rt_tables.d", "*.conf"))
		for _, f := range confs {
			if b, err := os.ReadFile(f); err == nil {
				parseRTTables(b, names)
				found = true
			}
		}
	}
	if !found {
		return nil, errors.New("no rt_tables file in " + strings.Join(rtTablesDirs, ", "))
	}
	return names, nil
}

// parseRTTables adds the "number name" lines of an rt_tables file to
// names; '#' starts a comment. A number may be hexadecimal (0x), as ip
// reads it.
func parseRTTables(b []byte, names map[string]uint32) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 0, 32)
		if err != nil || n == 0 {
			continue
		}
		names[f[1]] = uint32(n)
	}
}

// tableNames looks up a Table name with read. Problems are reported at
// the Table line.
func (p *parser) tableNames(read tablesReader) {
	if p.tableLine == 0 {
		return
	}
	t := &p.iface.Table
	names, err := read()
	if err != nil {
		p.errorf(p.tableLine, secInterface, "Table", "%q: cannot read the table names (%v); write the table's number", t.Name, err)
		return
	}
	id, ok := names[t.Name]
	if !ok {
		p.errorf(p.tableLine, secInterface, "Table", "%q is no table name in rt_tables; write the table's number, or auto or off", t.Name)
		return
	}
	t.ID = id
}
