# ctest: timeout 120; labels cluster; lock cluster
# `cluster down` removes everything, also after a run that was killed: an
# `up --slurm` SIGKILLed half-way, then a complete one with a job left
# running. Afterwards no namespace, link, bridge, /etc/hosts entry, daemon or
# state directory of the cluster is left. `up` twice with the same hosts is
# idempotent (and reshapes the link); with another number of hosts it
# refuses and says why; `down` with nothing up is fine.
source "$(dirname "$0")/lib.sh" "$1"
cluster_clear
trap '"$CLUSTER" down > /dev/null 2>&1; rm -rf "$WORK"' EXIT
STATE=/run/mpiaccel-cluster

leftovers() {  # what of a cluster exists now, one line each
  ip netns list | grep -o '^mpc-node[0-9]*'
  ip -br link | grep -o '^mpc-[a-z0-9]*'
  grep -c '^# mpiaccel cluster' /etc/hosts | grep -v '^0$' | sed 's/^/hosts lines: /'
  pgrep -a -f "slurmctld -f $STATE|slurmd -f $STATE|munged .*$STATE"
  [ -e "$STATE" ] && echo "$STATE exists"
}

MPIACCEL_CLUSTER_OWNER=test "$CLUSTER" up --hosts 3 --slurm > killed.out 2>&1 &
up=$!
sleep 0.7
kill -9 "$up" 2> /dev/null
wait "$up" 2> /dev/null
[ -n "$(leftovers)" ] || echo "(the killed up had not created anything yet)"
"$CLUSTER" down > down1.out 2>&1 || { cat down1.out; fail "down after a killed up"; }
left=$(leftovers)
[ -z "$left" ] || fail "left after down: $left"

MPIACCEL_CLUSTER_OWNER=test "$CLUSTER" up --hosts 2 --slurm --link 1gbit,0.2ms > up.out 2>&1 || { cat up.out; fail "cluster up"; }
expect_contains up.out "2 host(s), link 1gbit,0.2ms"
for dev in "ip netns exec mpc-node1 tc qdisc show dev eth0" "tc qdisc show dev mpc-node1"; do
  $dev | grep -q 'tbf 1: root.*rate 1Gbit' || fail "node1's link is not shaped: $($dev)"
done
"$CLUSTER" up --hosts 2 --link 10gbit,0.05ms > again.out 2>&1 || { cat again.out; fail "up again"; }
expect_contains again.out "link 10gbit,0.05ms"
if "$CLUSTER" up --hosts 3 > other.out 2>&1; then fail "up with another number of hosts was accepted"; fi
expect_contains other.out "a cluster of 2 hosts is up; 'cluster down' first to make one of 3"
# A job still running on both hosts when the cluster goes down.
"$CLUSTER" run node1 sbatch -N 2 --wrap "srun sleep 300" > job.out 2>&1 || { cat job.out; fail "sbatch"; }
sleep 2
"$CLUSTER" down > down2.out 2>&1 || { cat down2.out; fail "down"; }
left=$(leftovers)
[ -z "$left" ] || fail "left after down: $left"
pgrep -x sleep -a | grep -q 'sleep 300' && fail "the job's processes outlived the cluster"
"$CLUSTER" down > down3.out 2>&1 || fail "down with nothing up"
echo PASS
