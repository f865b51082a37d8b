# ctest: timeout 3600; labels long
# The soak (docs/checkpoint.md, "The soak"; `make bench` runs it, `make test`
# does not): the bundled job at np 3 for SOAK_STEPS steps (2,000) with a
# checkpoint every 10, interrupted about SOAK_INTERRUPTIONS times (20) by a
# SIGKILL or a SIGUSR1 of a random rank at a random moment, each time
# resubmitted with checkpoint.resume=latest by a loop like the Slurm scripts'
# requeue. At the end the final parameters equal an uninterrupted run's bit
# for bit (`mpiaccel ckpt diff --atol 0`), and the metrics file holds every
# step exactly once. Prints the wall time lost per interruption.
source "$(dirname "$0")/lib.sh" "$1"

STEPS=${SOAK_STEPS:-2000}
INTERRUPTIONS=${SOAK_INTERRUPTIONS:-20}
JOB="$SOURCE_DIR/jobs/fortunes-gpt.ini"
# As shipped, but longer, logged every step, and a checkpoint every 10 steps.
COMMON=(train.max_steps="$STEPS" train.log_every=1 logging.progress=lines checkpoint.every_steps=10
        checkpoint.keep_last=3)
RANDOM=${SOAK_SEED:-7}

start=$SECONDS
mpi 3 "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" logging.metrics_file=straight.jsonl \
  checkpoint.dir=straight > straight.out 2>&1 || { tail straight.out; fail "uninterrupted run"; }
straight_s=$((SECONDS - start))
echo "uninterrupted: $STEPS steps in $straight_s s"

# Each attempt runs until it ends by itself or is interrupted once, at a
# random moment within the time the rest of the run would take.
start=$SECONDS
attempts=0 kills=0 preemptions=0 resume=none
while :; do
  attempts=$((attempts + 1))
  ((attempts <= INTERRUPTIONS * 3)) || fail "still not finished after $attempts attempts"
  mpi 3 "$MPIACCEL" train --config "$JOB" "${COMMON[@]}" logging.metrics_file=soak.jsonl \
    checkpoint.dir=soak checkpoint.resume=$resume > "attempt$attempts.out" 2>&1 &
  launcher=$!
  resume=latest
  if ((kills + preemptions < INTERRUPTIONS)); then
    sleep "$((2 + RANDOM % (straight_s * 2 / INTERRUPTIONS + 1))).$((RANDOM % 10))"
    ranks=($(rank_pids logging.metrics_file=soak.jsonl mpiaccel))
    if ((${#ranks[@]} == 3)) && kill -0 "$launcher" 2> /dev/null; then
      victim=${ranks[$((RANDOM % 3))]}
      if ((RANDOM % 2)); then
        kill -KILL "$victim" && kills=$((kills + 1))
      else
        kill -USR1 "$victim" && preemptions=$((preemptions + 1))
      fi
    fi
  fi
  wait "$launcher"
  status=$?
  echo "attempt $attempts: exit $status (kills $kills, pre-emptions $preemptions)"
  ((status == 0)) && break
  [ -s soak/latest ] || resume=none  # killed before the first checkpoint
done
soak_s=$((SECONDS - start))
interruptions=$((kills + preemptions))
echo "soak: $STEPS steps in $soak_s s over $attempts attempts: $kills SIGKILLs, $preemptions SIGUSR1s"
((interruptions > 0)) && echo "wall time lost per interruption: $(((soak_s - straight_s) / interruptions)) s" \
  "(soak $soak_s s against uninterrupted $straight_s s)"
((interruptions >= INTERRUPTIONS / 2)) || fail "only $interruptions interruptions happened"

final=$(printf 'step_%08d.h5' "$STEPS")
"$MPIACCEL" ckpt diff "straight/$final" "soak/$final" --atol 0 > diff.out 2>&1 \
  || { cat diff.out; fail "the soak's final parameters differ from the uninterrupted run's"; }
cat diff.out | tail -2
/usr/bin/python3 - "$STEPS" <<'PY' || fail "the metrics file does not hold each step once"
import collections, json, sys
steps = int(sys.argv[1])
seen = collections.Counter(r["step"] for r in map(json.loads, open("soak.jsonl")) if "loss" in r)
twice = sorted(s for s, n in seen.items() if n > 1)
missing = sorted(set(range(1, steps + 1)) - set(seen))
print("metrics: %d steps logged, %d twice, %d missing" % (len(seen), len(twice), len(missing)))
sys.exit(1 if twice or missing else 0)
PY
echo "PASS"
