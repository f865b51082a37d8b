#!/usr/bin/env bash
# Sharded training across 2 hosts of the cluster in a box over a shaped link:
# ours FSDP (and, at 2 ranks per host, with the two-level reduce-scatters and
# all-gathers switched off: MPIACCEL_HIERARCHICAL_ALLREDUCE=0), ours FSDP with
# ZeRO++'s int8 weight all-gathers ([fsdp] quantized_weights), ours with all
# of ZeRO++ (+ quantized_gradients, secondary_partition_size = 0: backward
# gathers within the host), and PyTorch's FSDP2 (fully_shard per
# DecoderLayer, gloo, the .venv's torch: bench/fsdp/torch_peer.py), on the
# same GPT, batch and AdamW step (bench/fsdp's bench_fsdp, one thread per
# rank).
#
#   fsdp.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# Environment: MULTINODE_LINKS ("1gbit,0.2ms 10gbit,0.05ms"), MULTINODE_LAYOUTS
# ("2x1 2x2": hosts x ranks per host), MULTINODE_FSDP_MODEL ("--n-layer 4
# --n-embd 384 --n-head 6": 7.2M parameters, 29 MB in fp32, so a 1 Gbit/s
# step is a few tenths of a second), MULTINODE_WARMUP (2), MULTINODE_ITERS (5).
# Needs root; a cluster of your own must be down. Writes
# OUT_DIR/multinode_fsdp.csv (label, ranks, median step ms, link, layout)
# and prints the table: the median step and ours over FSDP2.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: fsdp.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/bench}
links=${MULTINODE_LINKS:-"1gbit,0.2ms 10gbit,0.05ms"}
layouts=${MULTINODE_LAYOUTS:-"2x1 2x2"}
model=${MULTINODE_FSDP_MODEL:-"--n-layer 4 --n-embd 384 --n-head 6"}
warmup=${MULTINODE_WARMUP:-2}
iters=${MULTINODE_ITERS:-5}
cluster=$root/tools/cluster/cluster
ours=$build/bin/bench_fsdp
python=${MULTINODE_PYTHON:-$root/.venv/bin/python}

[ "$(id -u)" = 0 ] || { echo "bench/multinode: needs root (tools/cluster/cluster makes namespaces)" >&2; exit 1; }
[ -x "$ours" ] || { echo "bench/multinode: $ours not found: build bench_fsdp" >&2; exit 1; }
"$cluster" status | grep -q '^no cluster is up' \
  || { echo "bench/multinode: a cluster is up: bring it down first ($cluster down)" >&2; exit 1; }
trap '"$cluster" down > /dev/null 2>&1' EXIT

mkdir -p "$out"
raw=$out/multinode_fsdp.csv
echo "label,ranks,step_ms,link,layout" > "$raw"
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
FSDP=(distributed.strategy=fsdp fsdp.auto_wrap_policy=TRANSFORMER_BASED_WRAP fsdp.transformer_layer_cls_to_wrap=DecoderLayer)
# ZeRO++'s three parts: int8 weight gathers, int8 gradient all-to-all, backward's gathers within the host.
ZEROPP=(fsdp.quantized_weights=true fsdp.quantized_gradients=true fsdp.secondary_partition_size=0)

run_config() {  # LINK LAYOUT IMPL
  local link=$1 layout=$2 impl=$3 tmp
  local hosts=${layout%x*} per_host=${layout#*x}
  local where=(--host "node1:$per_host,node2:$per_host") np=$((hosts * per_host))
  tmp=$(mktemp -u)
  local cmd
  # shellcheck disable=SC2206  # the model arguments are a word list
  local args=(--label "$impl" --csv "$tmp" --warmup "$warmup" --iters "$iters" $model)
  case $impl in
    ours-fsdp) cmd=(mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${args[@]}" "${FSDP[@]}") ;;
    ours-fsdp-flat) cmd=(mpirun "${flags[@]}" -x MPIACCEL_HIERARCHICAL_ALLREDUCE=0 "${where[@]}" -np "$np" "$ours" "${args[@]}" "${FSDP[@]}") ;;
    ours-fsdp-qwz) cmd=(mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${args[@]}" "${FSDP[@]}" fsdp.quantized_weights=true) ;;
    ours-fsdp-zero++) cmd=(mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${args[@]}" "${FSDP[@]}" "${ZEROPP[@]}") ;;
    torch-fsdp2) cmd=(mpirun "${flags[@]}" "${where[@]}" -np "$np" -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=$((29500 + RANDOM % 1000))
                      -x GLOO_SOCKET_IFNAME=eth0 "$python" "$root/bench/fsdp/torch_peer.py" --strategy fsdp "${args[@]}") ;;
  esac
  local exit_status=0
  "$cluster" run node1 "${cmd[@]}" > "$tmp.log" 2>&1 || exit_status=$?
  # A row written is a measurement made: torch's peer can abort in its
  # teardown after writing it ("terminate called without an active exception").
  if [ ! -s "$tmp" ]; then
    cat "$tmp.log" >&2; echo "bench/multinode: $impl $layout at $link failed" >&2; rm -f "$tmp.log"; return 1
  fi
  [ "$exit_status" = 0 ] || echo "bench/multinode: $impl $layout at $link exited $exit_status after its measurement" >&2
  awk -F, -v l="${link/,//}" -v y="$layout" 'NR > 1 { print $1 "," $3 "," $5 "," l "," y }' "$tmp" >> "$raw"
  rm -f "$tmp" "$tmp.log"
}

status=0
for link in $links; do
  "$cluster" up --hosts 2 --link "$link" > /dev/null || exit 1
  for layout in $layouts; do
    impls="ours-fsdp ours-fsdp-qwz ours-fsdp-zero++ torch-fsdp2"
    # Two ranks per host: also the flat collectives (Open MPI's), as before the two-level ones.
    [ "${layout#*x}" = 1 ] || impls="$impls ours-fsdp-flat"
    for impl in $impls; do
      echo "bench/multinode: fsdp, $link, $layout, $impl" >&2
      run_config "$link" "$layout" "$impl" || status=1
    done
  done
done
"$python" - "$raw" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
step = {(r["link"], r["layout"], r["label"]): float(r["step_ms"]) for r in rows}
print("FSDP across 2 hosts of the cluster in a box (median step of the timed steps, ms)")
print(f"{'link':<14}{'layout':<8}{'impl':<18}{'step ms':>9}{'vs FSDP2':>10}")
for (link, layout, impl), t in sorted(step.items()):
    peer = step.get((link, layout, "torch-fsdp2"))
    ratio = f"{peer / t:.2f}x" if peer and impl != "torch-fsdp2" else "-"
    print(f"{link:<14}{layout:<8}{impl:<18}{t:>9.1f}{ratio:>10}")
PY
exit $status
