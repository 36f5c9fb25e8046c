#!/bin/bash
# temp debug: log unrecovered groups at the decoder (run from repo root after echolog patch)
set -e
python3 - <<'PY'
p='fec/window.go'; s=open(p).read()
old="""	if missing := k - s.delivered.countBelow(k); missing > 0 {
		d.stats.Unrecoverable++"""
new="""	if missing := k - s.delivered.countBelow(k); missing > 0 {
		if DbgHook != nil {
			var b []byte
			for i := 0; i < k+r; i++ {
				if s.present.has(i) {
					b = append(b, '1')
				} else {
					b = append(b, '0')
				}
			}
			DbgHook(fmt.Sprintf("UNREC g%d k%d r%d known %v recv %d delivered %d maxIdx %d dataK %d dataR %d %s", s.group, k, r, s.kKnown, recv, s.delivered.countBelow(k), s.maxIdx, s.dataK, s.dataR, b))
		}
		d.stats.Unrecoverable++"""
assert old in s; s=s.replace(old,new)
s=s.replace('import "time"','import (\n\t"fmt"\n\t"time"\n)',1)
s+="\n// DbgHook is a temporary debug hook.\nvar DbgHook func(string)\n"
open(p,'w').write(s)
p='shard/report.go'; s=open(p).read()
s+="""
func init() {
	fec.DbgHook = func(m string) {
		if dbgF != nil {
			fmt.Fprintf(dbgF, "%d %s\\n", time.Now().UnixMilli(), m)
		}
	}
}
"""
open(p,'w').write(s)
PY
