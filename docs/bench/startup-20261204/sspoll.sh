#!/bin/bash
# poll the sender's TCP state (ss -tin) in yipA namespaces every 50 ms, and nstat snapshots every 1 s
out=$1
n=0
while true; do
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^yipA'); do
    s=$(ip netns exec $ns ss -tinH state established '( dport = :5201 )' 2>/dev/null | tr -s ' \n\t' ' ')
    [ -n "$s" ] && echo "$(date +%s.%N | cut -c1-14) $ns $s" >> $out.ss
    if [ $((n % 20)) = 0 ]; then
      echo "$(date +%s.%N | cut -c1-14) $ns $(ip netns exec $ns nstat -az 2>/dev/null | grep -E 'Undo|DSACK|SackRecovery|LostRetrans|SpuriousRTO|TCPTimeouts|RenoRecovery|TCPLossProbes|TCPLossProbeRecovery|PAWS|TCPSACKReorder|TCPTSReorder' | awk '{printf "%s=%s ", $1, $2}')" >> $out.nstat
    fi
  done
  n=$((n+1))
  sleep 0.05
done
