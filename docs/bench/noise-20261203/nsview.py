import json,sys
prev=None;pt=None;t0=None
for line in open(sys.argv[1]):
    parts=line.split(' ',2)
    if parts[1]!=sys.argv[2]: continue
    try: d=json.loads(parts[2])
    except: continue
    if not d or not d[0]['l']: continue
    t=float(parts[0]); t0=t0 or t
    for l in d[0]['l']:
        if l[11] < 1000: continue
        key=(l[0],l[1],l[3],l[4],l[5],l[7],l[9])
        if key!=prev:
            print("%6.2f lane %d %-10s loss %6.3f burst %5.2f %-5s %-7s rtt %6.1f c %d/%d q %d/%d tx %d rec %d"%(t-t0,l[0],l[1],l[2],l[3],l[4],l[5],l[6] or 0,l[8],l[7],l[10],l[9],l[11],l[12]))
            prev=key
