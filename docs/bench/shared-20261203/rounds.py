import json,sys
for f in sys.argv[1:]:
    d=json.load(open(f))
    for r in d['records']:
        if 'tcp' not in r['test']: continue
        if r['impl']!='yip-router':
            print(r['round'], 'wg', r['test'], '%.0f'%(r.get('recv_gbps',0)*1000), 'qdrops', r['bridge'][0].get('drop_queue',0)); continue
        fs=r['fec_steady']; f0=r['fec']
        par=fs['parity_out']/max(1,fs['udp_out'])
        back=fs.get('parity_back',0)/max(1,fs.get('udp_back',1))
        print(r['round'], r['test'], '%.0f Mbit/s'%(r['recv_gbps']*1000), 'parity %.1f%%'%(100*par), 'back %.1f%%'%(100*back), 'unrec', f0['unrecovered'], 'rec', f0['recovered'], 'qdrops', r['bridge'][0].get('drop_queue',0), r.get('path_states'), 'rtt', r.get('tcp_rtt_ms'))
