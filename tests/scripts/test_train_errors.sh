# ctest: timeout 120
# Bad input to `mpiaccel train` ends every rank with one clear line and a
# non-zero status, never a hang.
source "$(dirname "$0")/lib.sh" "$1"

printf '[train]\nmax_steps = 5\n[ddp]\nbucket_capmb = 4\n' > bad.ini
if mpi 2 "$MPIACCEL" train --config bad.ini > out.txt 2> err.txt; then fail "bad key accepted"; fi
expect_contains err.txt "mpiaccel: train: bad.ini:4: [ddp] bucket_capmb: unknown key; did you mean 'bucket_cap_mb'?"
[ "$(grep -c 'mpiaccel: train:' err.txt)" = 1 ] || fail "the error should be reported once: $(cat err.txt)"

if mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" train.data_dir=/nonexistent/fortunes \
     > out.txt 2> err.txt; then fail "missing dataset accepted"; fi
expect_contains err.txt "/nonexistent/fortunes"
expect_contains err.txt "fortunes"

# NCCL asked for on CPU ranks: every rank ends with the reason, once.
if mpi 2 "$MPIACCEL" train --config "$SOURCE_DIR/jobs/fortunes-gpt.ini" distributed.backend=nccl \
     distributed.device=cpu > out.txt 2> err.txt; then fail "backend = nccl accepted on CPU ranks"; fi
expect_contains err.txt "[distributed] backend = nccl needs a CUDA device, but this rank runs on the CPU"
[ "$(grep -c 'needs a CUDA device' err.txt)" = 1 ] || fail "the error should be reported once: $(cat err.txt)"

"$MPIACCEL" train > out.txt 2> err.txt
status=$?
[ "$status" = 2 ] || fail "usage error should exit 2, got $status"
expect_contains err.txt "--config FILE is required"

if "$MPIACCEL" train --config missing.ini > out.txt 2> err.txt; then fail "missing config accepted"; fi
expect_contains err.txt "missing.ini"
echo "PASS"
