#!/bin/bash
# poll sender-side TCP state and HyStart counters in the A namespaces
out=$1
while true; do
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^(yipA|ycmpA)'); do
    h=$(ip netns exec $ns nstat -asz TcpExtTCPHystartTrainDetect TcpExtTCPHystartTrainCwnd TcpExtTCPHystartDelayDetect TcpExtTCPHystartDelayCwnd TcpExtTCPSackRecovery TcpExtTCPFullUndo TcpExtTCPPartialUndo TcpExtTCPDSACKUndo TcpExtTCPLossUndo TcpExtTCPDSACKRecv 2>/dev/null | awk 'NR>1{sub("TcpExtTCP","",$1); printf "%s=%s ", $1, $2}')
    s=$(ip netns exec $ns ss -tinH 'dport = :5201' 2>/dev/null | tr '\n' ' ' | grep -oE '( cwnd:[0-9]+| ssthresh:[0-9]+| rtt:[0-9./]+|unacked:[0-9]+|lost:[0-9]+|retrans:[0-9/]+|reordering:[0-9]+)' | tr '\n' ' ')
    [ -n "$s" ] && echo "$(date +%s.%N | cut -c1-14) $ns $s | $h" >> $out
  done
  sleep 0.08
done
