import json,sys
runs=[];cur=None;lastA=None
for line in open(sys.argv[1]):
    t,ns,js=line.split(' ',2); t=float(t)
    try: d=json.loads(js)
    except: continue
    if not d: 
        continue
    d=d[0]
    if ns.startswith('yipA'):
        if not d['l']:
            cur=None; continue
        if cur is None:
            cur={'start':t,'A':[],'B':[]}; runs.append(cur)
        cur['A'].append((t,d['l']))
    elif cur is not None:
        cur['B'].append((t,d['lost'],d['rec']))
for i,r in enumerate(runs):
    print("run",i)
    prev=None
    for t,l,rc in r['B']:
        if l!=prev: print("   B t=%.2f lost %d rec %d"%(t-r['start'],l,rc)); prev=l
    prevf=None
    for t,l in r['A']:
        s=[tuple(x[1:6]) for x in l[:1]]
        if s!=prevf: print("   A t=%.2f %s tx=%d"%(t-r['start'],s,l[0][-2])); prevf=s
