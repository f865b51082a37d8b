# ctest: timeout 120
# `mpiaccel plot` draws a PNG from a metrics file like the trainer's (train
# rows, evaluation rows, a resumed run appending steps again, an incomplete
# last line), and fails clearly on bad input or without gnuplot.
source "$(dirname "$0")/lib.sh" "$1"

command -v gnuplot > /dev/null || fail "gnuplot is missing: make deps installs gnuplot-nox"

{
  for step in $(seq 5 5 60); do
    printf '{"step": %d, "loss": %s, "lr": %s, "grad_norm": 1.5, "elapsed_s": %d, "tokens_per_s": %d}\n' \
      "$step" "$(awk -v s="$step" 'BEGIN { print 5 - s / 20 }')" "$(awk -v s="$step" 'BEGIN { print 0.001 * s / 60 }')" "$step" $((2000 + step))
    [ $((step % 20)) = 0 ] && printf '{"step": %d, "val_loss": %s, "elapsed_s": %d}\n' "$step" "$(awk -v s="$step" 'BEGIN { print 5.2 - s / 20 }')" "$step"
  done
  # A resumed run appends from step 50 again; then a line cut short.
  printf '{"step": 50, "loss": 2.4, "lr": 0.0008, "elapsed_s": 1.0, "tokens_per_s": 2100}\n'
  printf '{"step": 55, "loss": 2.3, "lr'
} > metrics.jsonl

"$MPIACCEL" plot metrics.jsonl -o loss.png --title "test run" > out.txt 2> err.txt || { cat err.txt; fail "plot failed"; }
expect_contains out.txt "loss.png (12 training points, 3 evaluations)"
[ "$(head -c 8 loss.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "loss.png is not a PNG"
size=$(stat -c %s loss.png)
[ "$size" -gt 20000 ] || fail "loss.png is only $size bytes: empty panels?"
# 900×1050 pixels (the IHDR chunk, big-endian width and height).
[ "$(od -An -tu1 -j16 -N8 loss.png | tr -s ' ' | sed 's/^ //')" = "0 0 3 132 0 0 4 26" ] || fail "unexpected size"

# Default output name: METRICS with .png; samples_per_s works too.
printf '{"step": 1, "loss": 2.0, "lr": 0.1, "samples_per_s": 50}\n{"step": 2, "loss": 1.5, "lr": 0.1, "samples_per_s": 55}\n' > mlp.jsonl
"$MPIACCEL" plot mlp.jsonl > out.txt 2> err.txt || { cat err.txt; fail "plot without -o failed"; }
[ -s mlp.png ] || fail "no mlp.png"

# Bad input: exit 1 and one line that says where.
printf '{"step": 1, "loss": 2.0}\nnot json\n{"step": 2, "loss": 1.0}\n' > bad.jsonl
"$MPIACCEL" plot bad.jsonl -o bad.png > out.txt 2> err.txt
[ $? = 1 ] || fail "a bad line should exit 1"
expect_contains err.txt "mpiaccel: plot: bad.jsonl:2: not a JSON object of metrics"
printf '{"step": 1, "val_loss": 2.0}\n' > noloss.jsonl
"$MPIACCEL" plot noloss.jsonl > out.txt 2> err.txt && fail "a file without training rows was plotted"
expect_contains err.txt "has no training rows"
"$MPIACCEL" plot missing.jsonl > out.txt 2> err.txt && fail "a missing file was plotted"
expect_contains err.txt "cannot read 'missing.jsonl'"
"$MPIACCEL" plot > out.txt 2> err.txt
[ $? = 2 ] || fail "no file should be a usage error"

# Without gnuplot on PATH: the package to install is named.
mkdir -p nobin
PATH=$WORK/nobin "$MPIACCEL" plot metrics.jsonl -o x.png > out.txt 2> err.txt && fail "plotted without gnuplot"
expect_contains err.txt "gnuplot not found on PATH; install Debian's gnuplot-nox"
[ ! -e x.png ] || fail "x.png written without gnuplot"
echo "PASS"
