#!/usr/bin/env bash
# The multi-node benchmark: DDP across the hosts of the cluster in a box
# (tools/cluster/cluster) over a shaped link, ours beside PyTorch's DDP
# (the .venv's torch, else Debian's python3-torch; gloo) under the same mpirun, on the model of
# bench/ddp (4 x (Linear 512->2048, GELU, Linear 2048->512), 8.4M parameters,
# batch 32 per rank, SGD, one thread per rank).
#
#   run.sh BUILD_DIR [OUT_DIR]          (OUT_DIR defaults to BUILD_DIR/bench)
#
# For each link (MULTINODE_LINKS, default "1gbit,0.2ms 10gbit,0.05ms") and each
# layout (MULTINODE_LAYOUTS, default "1x1 1x2 2x1 2x2": hosts x ranks per host):
#   ours-flat       one all-reduce over all ranks (MPIACCEL_HIERARCHICAL_ALLREDUCE=0):
#                   the pipelined ring across the hosts
#   ours-ompi       the same with Open MPI's MPI_Allreduce instead of the ring
#                   (MPIACCEL_RING_ALLREDUCE=0): the ring's gain, in the same run
#   ours-hier       the hierarchical all-reduce (within the host, across, within)
#   ours-hier-bf16  the same with bf16 on the wire ([distributed] reduce_dtype)
#   torch           PyTorch DDP, gloo, fp32
#   torch-fp16      PyTorch DDP with its fp16 compression hook (16 bits on the wire)
#   ours-powersgd   PowerSGD at rank MULTINODE_POWERSGD_RANK (32) from step 2
#                   ([ddp] comm_hook = powersgd), over the flat all-reduce
#   torch-powersgd  PyTorch DDP with its PowerSGD hook, the same rank, from step 2,
#                   in one bucket (bucket_cap_mb 100): with several buckets torch's
#                   PowerSGD on gloo issues its second all-reduces in a different
#                   order on each rank and gloo fails ("Received data size doesn't
#                   match expected size")
# and, for weak scaling, the same ranks per host on one host alone (ours and
# torch). Every configuration runs twice, with MULTINODE_ITERS and twice as
# many timed steps: the difference of the bytes that crossed the hosts' links
# (the host side of each veth) over the difference of steps is the bytes per
# step on the inter-node link, without the start-up's. Needs root (the
# cluster); a cluster of your own must be down. Writes OUT_DIR/multinode_raw.csv,
# OUT_DIR/multinode_bytes.csv and OUT_DIR/multinode.csv; prints the table.
# Then runs allreduce.sh (the all-reduce alone: ours, Open MPI's, gloo's) and
# fsdp.sh (FSDP, FSDP + ZeRO++ qwZ and torch's FSDP2 across the hosts),
# unless MULTINODE_ALLREDUCE=0 / MULTINODE_FSDP=0.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/bench}
links=${MULTINODE_LINKS:-"1gbit,0.2ms 10gbit,0.05ms"}
layouts=${MULTINODE_LAYOUTS:-"1x1 1x2 2x1 2x2"}
powersgd_rank=${MULTINODE_POWERSGD_RANK:-32}
iters=${MULTINODE_ITERS:-5}
warmup=${MULTINODE_WARMUP:-2}
cluster=$root/tools/cluster/cluster
ours=$build/bin/bench_ddp
# The peer: the .venv's torch (the LibTorch ours is built on), else Debian's.
python=${MULTINODE_PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=/usr/bin/python3

[ "$(id -u)" = 0 ] || { echo "bench/multinode: needs root (tools/cluster/cluster makes namespaces)" >&2; exit 1; }
[ -x "$ours" ] || { echo "bench/multinode: $ours not found: build bench_ddp" >&2; exit 1; }
"$cluster" status | grep -q '^no cluster is up' \
  || { echo "bench/multinode: a cluster is up: bring it down first ($cluster down)" >&2; exit 1; }
trap '"$cluster" down > /dev/null 2>&1' EXIT

mkdir -p "$out"
raw=$out/multinode_raw.csv
bytes=$out/multinode_bytes.csv
echo "impl,ranks,round,iter,step_ms,forward_ms,backward_ms,optimizer_ms,cpu_ms,comm_ms,hidden_ms,exposed_ms,link,layout" > "$raw"
echo "link,layout,impl,iters,bytes" > "$bytes"
export MPIACCEL_HIERARCHICAL_ALLREDUCE=1  # each run below sets it; -x passes it to every host
flags=(--oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x MPIACCEL_HIERARCHICAL_ALLREDUCE)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)

link_bytes() {  # bytes delivered into every host from the bridge so far
  local total=0 dev
  for dev in /sys/class/net/mpc-node*/statistics/tx_bytes; do total=$((total + $(cat "$dev"))); done
  echo "$total"
}

# run_config LINK LAYOUT IMPL N: one run of N timed steps; appends its rows and bytes.
run_config() {
  local link=$1 layout=$2 impl=$3 n=$4 hosts per_host np tmp before after
  hosts=${layout%x*}
  per_host=${layout#*x}
  np=$((hosts * per_host))
  local where=(--host "node1:$per_host")
  [ "$hosts" = 2 ] && where=(--host "node1:$per_host,node2:$per_host")
  tmp=$(mktemp)
  local common=(--raw "$tmp" --warmup "$warmup" --iters "$n" --optimizer sgd)
  local cmd
  case $impl in
    ours-flat) cmd=(env MPIACCEL_HIERARCHICAL_ALLREDUCE=0 mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${common[@]}" --label "$impl") ;;
    ours-ompi) cmd=(env MPIACCEL_HIERARCHICAL_ALLREDUCE=0 mpirun "${flags[@]}" -x MPIACCEL_RING_ALLREDUCE=0 "${where[@]}" -np "$np" "$ours" "${common[@]}" --label "$impl") ;;
    ours-hier|ours) cmd=(env MPIACCEL_HIERARCHICAL_ALLREDUCE=1 mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${common[@]}" --label "$impl") ;;
    ours-hier-bf16) cmd=(env MPIACCEL_HIERARCHICAL_ALLREDUCE=1 mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${common[@]}" --label "$impl" distributed.reduce_dtype=bf16) ;;
    ours-powersgd) cmd=(env MPIACCEL_HIERARCHICAL_ALLREDUCE=0 mpirun "${flags[@]}" "${where[@]}" -np "$np" "$ours" "${common[@]}" --label "$impl"
                        ddp.comm_hook=powersgd ddp.powersgd_rank="$powersgd_rank" ddp.powersgd_start_iter=2) ;;
    torch|torch-fp16|torch-powersgd)
      local hook=${impl#torch-}
      [ "$impl" = torch ] && hook=none
      cmd=(mpirun "${flags[@]}" "${where[@]}" -np "$np" -x MASTER_ADDR=10.77.0.1 -x MASTER_PORT=$((29500 + RANDOM % 1000))
           -x GLOO_SOCKET_IFNAME=eth0 "$python" "$here/../ddp/torch_ddp.py" "${common[@]}" --label "$impl" --comm-hook "$hook"
           --powersgd-rank "$powersgd_rank")
      [ "$impl" = torch-powersgd ] && cmd+=(--bucket-cap-mb 100) ;;
  esac
  before=$(link_bytes)
  "$cluster" run node1 "${cmd[@]}" > "$tmp.log" 2>&1 || { cat "$tmp.log" >&2; echo "bench/multinode: $impl $layout at $link failed" >&2; rm -f "$tmp" "$tmp.log"; return 1; }
  after=$(link_bytes)
  local label=${link/,//}  # 1gbit/0.2ms: the CSV's comma stays a separator
  sed "s|\$|,$label,$layout|" "$tmp" >> "$raw"
  echo "$label,$layout,$impl,$n,$((after - before))" >> "$bytes"
  rm -f "$tmp" "$tmp.log"
}

"$cluster" up --hosts 2 > /dev/null || exit 1
status=0
for link in $links; do
  "$cluster" up --hosts 2 --link "$link" > /dev/null || exit 1
  for layout in $layouts; do
    case $layout in
      1x*) impls=(ours torch) ;;
      2x1) impls=(ours-flat ours-ompi ours-hier-bf16 ours-powersgd torch torch-fp16 torch-powersgd) ;;
      2x2) impls=(ours-flat ours-ompi ours-hier ours-hier-bf16 ours-powersgd torch torch-fp16 torch-powersgd) ;;
    esac
    for impl in "${impls[@]}"; do
      echo "bench/multinode: $link, $layout, $impl" >&2
      run_config "$link" "$layout" "$impl" "$iters" && run_config "$link" "$layout" "$impl" $((2 * iters)) || status=1
    done
  done
done
"$python" "$here/summarize.py" "$raw" "$bytes" "$out/multinode.csv" \
  --note "$warmup warm-up + $iters and $((2 * iters)) timed steps per configuration, $(nproc) cores shared by both hosts"
# Then the all-reduce alone (allreduce.sh) and sharded training (fsdp.sh)
# across the hosts, unless MULTINODE_ALLREDUCE=0 / MULTINODE_FSDP=0.
"$cluster" down > /dev/null 2>&1
if [ "${MULTINODE_ALLREDUCE:-1}" != 0 ]; then bash "$here/allreduce.sh" "$build" "$out" || status=1; fi
if [ "${MULTINODE_FSDP:-1}" != 0 ]; then bash "$here/fsdp.sh" "$build" "$out" || status=1; fi
exit $status
