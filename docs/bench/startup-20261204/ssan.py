import re,sys
runs=[];cur=None
for line in open(sys.argv[1]):
    t,ns,rest=line.split(' ',2); t=float(t)
    conns=re.split(r' (?=\d+ \d+ [\d.]+:\d+ [\d.]+:5201)', rest)
    best=None
    for c in conns:
        m=re.search(r'bytes_sent:(\d+)',c)
        if m and (best is None or int(m.group(1))>best[0]): best=(int(m.group(1)),c)
    if not best or best[0]<100000: continue
    c=best[1]
    port=re.search(r':(\d+) [\d.]+:5201',c).group(1)
    if cur is None or cur['port']!=port or cur['ns']!=ns:
        cur={'port':port,'ns':ns,'t0':t,'rows':[]}; runs.append(cur)
    g=lambda k: (re.search(r'[ ^]'+k+r':([\d./]+)',' '+c) or [None,'-'])[1]
    cur['rows'].append((t-cur['t0'],t,g('cwnd'),g('ssthresh'),g('retrans'),g('dsack_dups'),g('lost'),g('delivered'), g('rtt')))
for i,r in enumerate(runs):
    rows=r['rows']
    d=int(rows[-1][7])-int(rows[0][7]); dt=rows[-1][0]-rows[0][0]
    print('run',i,r['ns'],r['port'],'start %.3f'%r['t0'], 'avg %.0f Mbit/s'%(d*1358*8/dt/1e6 if dt>0 else 0))
    prev=None
    for row in rows:
        if row[3]!=prev or row[6]!='-':
            print('   %.2f (%.3f) cwnd %s ssth %s retrans %s dsack %s lost %s deliv %s rtt %s'%row)
        prev=row[3]
