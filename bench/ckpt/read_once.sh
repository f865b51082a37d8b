#!/bin/bash
# Loads that read each byte once, against today's reader (each rank reads
# what it loads), at np 1, 2, 4 and 8 (oversubscribed): bench_ckpt_read_once
# on a 256 MiB checkpoint, then on 2,000 small tensors.
#   usage: read_once.sh BUILD_DIR OUT_DIR [NPS]
set -eu
build=$1
out=$2
nps=${3:-1 2 4 8}
mpiexec=${MPIACCEL_MPIEXEC:-mpirun}
flags=${MPIACCEL_MPIEXEC_FLAGS:---oversubscribe --bind-to none $([ "$(id -u)" = 0 ] && echo --allow-run-as-root)}
mkdir -p "$out"
data=$out/read_once_data
report=$out/bench_ckpt_read_once.txt
: > "$report"
trap 'rm -rf "$data"' EXIT
for args in "--mib 256" "--mib 1 --small 2000"; do
  for np in $nps; do
    rm -rf "$data"
    # shellcheck disable=SC2086
    $mpiexec $flags -np "$np" -x OMP_NUM_THREADS=1 "$build/bin/bench_ckpt_read_once" "$data" $args |
      sed "s/^/[$args] /" | tee -a "$report"
  done
done
echo "report: $report"
