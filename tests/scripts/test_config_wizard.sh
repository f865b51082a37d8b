# ctest: timeout 300
# `mpiaccel config` driven through stdin: good answers, branches per strategy,
# a bad answer asked again with the accepted values, Enter for the default,
# input ending early (nothing written), --defaults, the XDG default path, and
# the written file read back by `mpiaccel launch` and `mpiaccel train`'s parser.
source "$(dirname "$0")/lib.sh" "$1"

# Answers, one per line: machines, processes, cpus per process, launcher,
# strategy ("dpp" is a typo, asked again), ZeRO stage ("4" out of range, asked
# again), offload optimizer, offload params, mixed precision, checkpoint dir,
# every steps, keep last (Enter: default).
printf '%s\n' 1 3 1 mpirun dpp zero 4 3 cpu none bf16 ckpt/run1 50 '' > answers.txt
"$MPIACCEL" config -o zero.ini < answers.txt > out.txt 2> err.txt || { cat out.txt err.txt; fail "wizard failed"; }
expect_contains out.txt "Which distribution strategy? (no|ddp|fsdp|zero) [no]: dpp"
expect_contains out.txt "[distributed] strategy: 'dpp' is not one of the choices (did you mean 'ddp'?); accepted: no|ddp|fsdp|zero"
expect_contains out.txt "ZeRO stage? 1 = optimizer state, 2 = + gradients, 3 = + parameters (0..3) [2]: 4"
expect_contains out.txt "[zero] stage: 4 is out of range; accepted: 0..3"
expect_contains out.txt "ZeRO-3: where do parameter shards live? (none|cpu) [none]"
expect_contains out.txt "wrote zero.ini"
[ "$(grep -c 'Which distribution strategy?' out.txt)" = 2 ] || fail "the bad strategy was not asked again"
for line in "num_processes = 3" "cpus_per_process = 1" "launcher = mpirun" "strategy = zero" "stage = 3" \
            "offload_optimizer = cpu" "offload_param = none" "mixed_precision = bf16" "dir = ckpt/run1" \
            "every_steps = 50" "keep_last = 3"; do
  grep -qx -- "$line" zero.ini || fail "'$line' not in zero.ini: $(grep -v '^;' zero.ini)"
done
grep -q '^; ' zero.ini || fail "the written file has no comments"

# The file is a valid config: launch reads its [launch] (3 ranks, mpirun),
# and passes it on to train.
"$MPIACCEL" launch --dry-run --config zero.ini -- "$MPIACCEL" train > cmd.txt 2> err.txt || {
  cat err.txt; fail "launch refused the written config"; }
expect_contains cmd.txt "mpirun -np 3"
expect_contains cmd.txt "train --config zero.ini"

# FSDP branch: 1 process (Enter) for 2 machines is refused and asked again;
# the wrap class is asked for TRANSFORMER_BASED_WRAP.
printf '%s\n' 2 '' 4 0 auto fsdp SHARD_GRAD_OP '' 'DecoderLayer,Block' yes no fp16 '' 0 0 > answers.txt
"$MPIACCEL" config -o fsdp.ini < answers.txt > out.txt 2> err.txt || { cat out.txt err.txt; fail "fsdp wizard failed"; }
expect_contains out.txt "at least one process per machine: give >= 2"
expect_contains out.txt "FSDP: module class names of the units, comma-separated (empty: the bundled model's)? []: DecoderLayer,Block"
for line in "num_machines = 2" "num_processes = 4" "strategy = fsdp" "sharding_strategy = SHARD_GRAD_OP" \
            "auto_wrap_policy = TRANSFORMER_BASED_WRAP" "transformer_layer_cls_to_wrap = DecoderLayer,Block" \
            "cpu_offload = true" "activation_checkpointing = false" "mixed_precision = fp16" "keep_last = 0"; do
  grep -qx -- "$line" fsdp.ini || fail "'$line' not in fsdp.ini"
done

# Running the wizard again on an existing file offers its values and keeps
# the keys it does not ask about.
printf '[train]\nmax_steps = 777\n[distributed]\nstrategy = ddp\n' > keep.ini
yes '' | head -n 20 | "$MPIACCEL" config -o keep.ini > out.txt 2> err.txt || { cat out.txt err.txt; fail "re-run failed"; }
expect_contains out.txt "Which distribution strategy? (no|ddp|fsdp|zero) [ddp]"
grep -qx "max_steps = 777" keep.ini || fail "the wizard dropped [train] max_steps"

# Input ends mid-wizard: a clear error, exit 1, nothing written.
printf '%s\n' 1 2 > short.txt
if "$MPIACCEL" config -o short.ini < short.txt > out.txt 2> err.txt; then fail "EOF accepted"; fi
expect_contains err.txt "mpiaccel: config: input ended before the question 'How many CPU cores per process?"
expect_contains err.txt "nothing was written"
[ ! -e short.ini ] && [ ! -e short.ini.tmp ] || fail "a file was written after EOF"

# --defaults to the XDG default path (directory created), read by launch
# without --config.
XDG_CONFIG_HOME=$WORK/xdg "$MPIACCEL" config --defaults < /dev/null > out.txt 2> err.txt || fail "--defaults failed"
[ -f xdg/mpiaccel/default.ini ] || fail "no \$XDG_CONFIG_HOME/mpiaccel/default.ini"
expect_contains xdg/mpiaccel/default.ini "strategy = no"
XDG_CONFIG_HOME=$WORK/xdg "$MPIACCEL" launch --dry-run -- "$MPIACCEL" train > cmd.txt 2> err.txt || fail "launch failed"
expect_contains cmd.txt "train --config $WORK/xdg/mpiaccel/default.ini"
# Without XDG_CONFIG_HOME: ~/.config.
env -u XDG_CONFIG_HOME HOME="$WORK/home" "$MPIACCEL" config --defaults launch.num_processes=2 < /dev/null > out.txt ||
  fail "--defaults under HOME failed"
grep -qx "num_processes = 2" home/.config/mpiaccel/default.ini || fail "no ~/.config/mpiaccel/default.ini"

# '-o -' prints the file, which train's strict parser reads back.
"$MPIACCEL" config --defaults -o - > printed.ini || fail "-o - failed"
"$MPIACCEL" launch --dry-run --config printed.ini -- true > /dev/null || fail "printed config not accepted"

# Usage errors exit 2.
"$MPIACCEL" config --bogus > out.txt 2> err.txt
[ $? = 2 ] || fail "a bad option should exit 2"
expect_contains err.txt "mpiaccel: config: unexpected argument '--bogus'"
echo "PASS"
