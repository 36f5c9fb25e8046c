import json,sys
for f in sys.argv[1:]:
    d=json.load(open(f))
    for r in d['records']:
        if r['impl']!='yip-router': continue
        fs=r['fec_steady']; f0=r['fec']
        par=fs['parity_out']/(fs['udp_out']-fs['parity_out'])
        print(r['round'], r['test'], '%.0f Mbit/s'%(r['recv_gbps']*1000), 'parity %.1f%%'%(100*par), 'unrec', f0['unrecovered'], 'rec', f0['recovered'], r['path_states'], 'rtt', r['tcp_rtt_ms'])
