#!/bin/bash
# poll both routers' lanes: fec, loss, path, split, recovered; per 0.1 s
out=$1
while true; do
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^yip[AB]'); do
    j=$(ip netns exec $ns /work/main/bin/yip-router show --json 2>/dev/null) || continue
    l=$(echo "$j" | jq -c '[.[0].peers[]? | {l:[.lanes[]? | [.index,.fec,(.fec_loss_pct//-1|.*1000|round/1000),((.fec_burst//0)*100|round/100),(.fec_burst_measured//false),.path,.rtt_ms,(.loss_split.clear_expected//0),(.loss_split.clear_lost//0),(.loss_split.queued_expected//0),(.loss_split.queued_lost//0),.tx_packets,.fec_recovered]], lost:.fec_unrecovered, rec:.fec_recovered}]' 2>/dev/null)
    echo "$(date +%s.%N | cut -c1-14) $ns $l" >> $out
  done
  sleep 0.1
done
