#!/bin/bash
# usage: ab.sh OUTDIR BIN ROUNDS SEED CCS [extra args]
out=$1; bin=$2; rounds=$3; seed=$4; ccs=$5; shift 5
mkdir -p $out
/tmp/sspoll.sh $out/tcp & p1=$!
cd /work/main && bin/bench-compare -yip $bin -wg bin/wireguard-go-v0.0.0-20260522210424-ecfc5a8d5446 -rounds $rounds -seed $seed -duration 10 -cc $ccs -tests tcp1 -delay 25ms -bottleneck 200M -placement unpinned -omit 0 -series $out/series -out $out "$@" > $out/out.log 2>&1
kill $p1
for f in $out/series/iperf-r*-yip*; do awk -v f=$(basename $f) 'NR>2 {s+=$2; n++} END{printf "%s %.1f\n", f, s/n}' $f; done
