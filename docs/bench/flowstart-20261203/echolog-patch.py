# Adds to reportlog-patch.py (docs/bench/standing-20261203) logs of lane installs,
# new paths, peer-feature changes and dropped echo samples (run from the
# repository root; add the "fmt"/"time" imports it needs, build, then
# git checkout shard/).
import subprocess
subprocess.check_call(['python3','docs/bench/standing-20261203/reportlog-patch.py','apply'])
def rep(path, old, new):
    s=open(path).read(); assert s.count(old)==1, (path, old); s=s.replace(old,new,1); open(path,'w').write(s)
rep('shard/report.go','burst %.2f %v\\n", s.now.UnixMilli()','burst %.2f %v feat %x dn %d age %v hs %v\\n", s.now.UnixMilli()')
rep('shard/report.go','ln.adapt.Depth(), b, m)','ln.adapt.Depth(), b, m, ln.peerFeatures, ln.delay.n, s.now.Sub(ln.delay.lastAt), ln.delay.hs)')
rep('shard/lane.go','	ln.delay.noteHandshake(cfg.RTT, s.now) // an initiator','	if dbgF != nil {\n\t\tfmt.Fprintf(dbgF, "%d lane %d INSTALL shard %d remote %v offered %v rtt %v new %v feat %x\\n", s.now.UnixMilli(), cfg.Index, s.id, ln.cfg.Remote, offered, cfg.RTT, ln.adapt == ad, ln.peerFeatures)\n\t}\n	ln.delay.noteHandshake(cfg.RTT, s.now) // an initiator')
rep('shard/split.go','func (ln *lane) newPath(now time.Time) {\n','func (ln *lane) newPath(now time.Time) {\n\tif dbgF != nil {\n\t\tfmt.Fprintf(dbgF, "%d lane %d NEWPATH remote %v\\n", now.UnixMilli(), ln.cfg.Index, ln.cfg.Remote)\n\t}\n')
rep('shard/features.go','	ln.peerFeatures = f\n','	if dbgF != nil && f != ln.peerFeatures {\n\t\tfmt.Fprintf(dbgF, "%d lane %d FEATURES %x -> %x\\n", time.Now().UnixMilli(), ln.cfg.Index, ln.peerFeatures, f)\n\t}\n	ln.peerFeatures = f\n')
rep('shard/delay.go','	if held > since {\n		return true','	if held > since {\n\t\tif dbgF != nil {\n\t\t\tfmt.Fprintf(dbgF, "%d ECHO held %d > since %d\\n", now.UnixMilli(), held, since)\n\t\t}\n		return true')
