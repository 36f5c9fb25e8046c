#!/bin/bash
out=$1
S="TcpExtTCPHystartDelayDetect TcpExtTCPHystartDelayCwnd TcpExtTCPSackRecovery TcpExtTCPFullUndo TcpExtTCPPartialUndo TcpExtTCPDSACKUndo TcpExtTCPLossUndo TcpExtTCPDSACKRecv TcpExtTCPLostRetransmit TcpExtTCPLossProbes TcpExtTCPTimeouts TcpExtTCPSACKReorder TcpExtTCPTSReorder TcpExtTCPDSACKIgnoredNoUndo TcpExtTCPDSACKIgnoredOld TcpExtTCPSpuriousRTOs TcpExtTCPRetransFail"
R="TcpExtPAWSEstab TcpExtPAWSActive TcpExtPAWSOldAck TcpExtTSECRRejected TcpExtTCPACKSkippedPAWS TcpExtTCPDSACKOldSent TcpExtTCPDSACKOfoSent TcpExtTCPOFOQueue TcpExtTCPOFODrop TcpExtTCPOFOMerge TcpExtTCPRcvQDrop TcpExtTCPZeroWindowDrop TcpInCsumErrors TcpInErrs IpInDiscards IpInHdrErrors IpExtInCsumErrors TcpExtTCPRcvCollapsed TcpExtPruneCalled TcpExtRcvPruned TcpExtOfoPruned"
while true; do
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^yip[AB]'); do
    case $ns in yipA*) L=$S ;; *) L=$R ;; esac
    h=$(ip netns exec $ns nstat -asz $L 2>/dev/null | awk 'NR>1{sub("TcpExt","",$1); printf "%s=%s ", $1, $2}')
    s=$(ip netns exec $ns ss -tinH '( dport = :5201 or sport = :5201 )' 2>/dev/null | tr '\n' ' ' | grep -oE '( cwnd:[0-9]+| ssthresh:[0-9]+| rtt:[0-9./]+|unacked:[0-9]+|lost:[0-9]+|retrans:[0-9/]+|reordering:[0-9]+|reord_seen:[0-9]+|dsack_dups:[0-9]+|rcv_ooopack:[0-9]+)' | tr '\n' ' ')
    echo "$(date +%s.%N | cut -c1-14) $ns $s | $h" >> $out
  done
  sleep 0.08
done
