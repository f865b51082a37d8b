#!/usr/bin/env bash
# The all-reduce alone between 2 hosts of the cluster in a box (1 rank each),
# over a shaped link: ours (Communicator::all_reduce: the pipelined ring across
# nodes, docs/comm.md), Open MPI's MPI_Allreduce (bench_comm's "mpi" column,
# the same run) and gloo's (bench/comm/torch_allreduce.py, the .venv's torch),
# float32, 4 KiB to MULTINODE_MAX_BYTES (64 MiB), as bus bandwidth and as the
# share of the link's rate (at 2 ranks each direction of the link carries the
# whole buffer once).
#
#   allreduce.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Environment: MULTINODE_LINKS ("1gbit,0.2ms 10gbit,0.05ms"), MULTINODE_MAX_BYTES.
# Needs root; a cluster of your own must be down. Writes
# OUT_DIR/multinode_allreduce.csv and prints the table.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: allreduce.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/bench}
links=${MULTINODE_LINKS:-"1gbit,0.2ms 10gbit,0.05ms"}
max_bytes=${MULTINODE_MAX_BYTES:-67108864}
cluster=$root/tools/cluster/cluster
python=${MULTINODE_PYTHON:-$root/.venv/bin/python}

[ "$(id -u)" = 0 ] || { echo "bench/multinode: needs root" >&2; exit 1; }
"$cluster" status | grep -q '^no cluster is up' \
  || { echo "bench/multinode: a cluster is up: bring it down first ($cluster down)" >&2; exit 1; }
trap '"$cluster" down > /dev/null 2>&1' EXIT
mkdir -p "$out"
csv=$out/multinode_allreduce.csv
echo "link,impl,bytes,us,busbw_GBps" > "$csv"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 --allow-run-as-root --host node1:1,node2:1 -np 2)
status=0
for link in $links; do
  "$cluster" up --hosts 2 --link "$link" > /dev/null || exit 1
  label=${link/,//}
  tmp=$(mktemp -u)
  echo "bench/multinode: all-reduce, $link, ours and Open MPI" >&2
  if "$cluster" run node1 mpirun "${flags[@]}" "$build/bin/bench_comm" "$tmp" "$max_bytes" all_reduce > "$tmp.log" 2>&1; then
    awk -F, -v l="$label" 'NR > 1 && $1 == "all_reduce" {
      printf "%s,ours,%s,%s,%.4f\n%s,openmpi,%s,%s,%.4f\n", l, $3, $5, $3 / $5 / 1e3, l, $3, $7, $3 / $7 / 1e3 }' \
      "$tmp" >> "$csv"
  else
    cat "$tmp.log" >&2; status=1
  fi
  echo "bench/multinode: all-reduce, $link, gloo" >&2
  if "$cluster" run node1 mpirun "${flags[@]}" -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=$((29500 + RANDOM % 1000)) \
       -x GLOO_SOCKET_IFNAME=eth0 "$python" "$root/bench/comm/torch_allreduce.py" "$tmp.gloo" "$max_bytes" > "$tmp.log" 2>&1; then
    awk -F, -v l="$label" 'NR > 1 { printf "%s,gloo,%s,%s,%.4f\n", l, $3, $5, $7 }' "$tmp.gloo" >> "$csv"
  else
    cat "$tmp.log" >&2; status=1
  fi
  rm -f "$tmp" "$tmp.log" "$tmp.gloo"
done
"$python" - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bw = {(r["link"], r["impl"], int(r["bytes"])): float(r["busbw_GBps"]) for r in rows}
rate = {"1gbit": 0.125, "10gbit": 1.25}
print("float32 all-reduce between 2 hosts (1 rank each): bus bandwidth GB/s, and % of the link")
print(f"{'link':<14}{'bytes':>10}" + "".join(f"{i:>18}" for i in ("ours", "openmpi", "gloo")))
for link, _, size in sorted({(l, i, s) for l, i, s in bw}, key=lambda k: (k[0], k[2])):
    if _ != "ours":
        continue
    link_rate = rate.get(link.split("/")[0], 0)
    cells = ""
    for impl in ("ours", "openmpi", "gloo"):
        v = bw.get((link, impl, size))
        cells += f"{v:10.3f} ({100 * v / link_rate:3.0f} %)" if v and link_rate else f"{'-':>18}"
    print(f"{link:<14}{size:>10}{cells}")
PY
exit $status
