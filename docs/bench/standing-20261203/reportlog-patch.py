# Adds a per-report log to shard/report.go (run from the repository root,
# argument 'apply'; build, then 'git checkout shard/report.go'): each loss
# report the adapter hears, as judged, with its split and the choice after,
# one line per report to /tmp/yipdbg/<pid>.log (the directory must exist).
import sys
p='shard/report.go'
s=open(p).read()
if sys.argv[1]=='apply':
    s=s.replace('''import (
	"time"
''','''import (
	"fmt"
	"os"
	"time"
''',1)
    n=s.count('''	ln.adapt.Observe(ln.held)
''')
    assert n==1, 'shard/report.go changed: no single Observe(ln.held) to log'
    s=s.replace('''	ln.adapt.Observe(ln.held)
''','''	dbgRep := ln.held
	ln.adapt.Observe(ln.held)
	if dbgF != nil {
		b, m := ln.adapt.Burst()
		k, r := ln.adapt.Ratio()
		fmt.Fprintf(dbgF, "%d lane %d st %v rep %d/%d runs %d unrec %d split %+v -> %d:%d x%d burst %.2f %v\\n", s.now.UnixMilli(), ln.cfg.Index, st, dbgRep.Expected-dbgRep.Received, dbgRep.Expected, dbgRep.Runs, dbgRep.Unrecovered, ln.lastSplit, k, r, ln.adapt.Depth(), b, m)
	}
''',1)
    s+='''
var dbgF = func() *os.File {
	f, _ := os.OpenFile(fmt.Sprintf("/tmp/yipdbg/%d.log", os.Getpid()), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	return f
}()
'''
    open(p,'w').write(s)
