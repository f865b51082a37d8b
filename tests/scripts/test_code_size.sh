# ctest: timeout 120
# The house keeps its shape: no source file of the library, its public headers
# or the command (src/, include/, tools/) over 500 lines, and no function
# there over 80 lines, except the declarative tables listed below. lizard
# (in .venv, `make deps`) measures functions as its C++ parser sees them.
source "$(dirname "$0")/lib.sh" "$1"
lizard=$SOURCE_DIR/.venv/bin/lizard
[ -x "$lizard" ] || fail "$lizard is missing; run make deps"

# Tables, not logic: one entry per config key.
allowed_long="build_schema"

cd "$SOURCE_DIR"
long_files=$(find src include tools -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \
  | xargs wc -l | awk '$2 != "total" && $1 > 500 {print "  " $2 ": " $1 " lines"}')
[ -z "$long_files" ] || fail "files over 500 lines (split them by job):
$long_files"

"$lizard" -l cpp -L 80 -C 100000 -w src include tools > "$WORK/long.txt" || true
long_functions=$(grep -vE "[: ]($(echo $allowed_long | tr ' ' '|')) has " "$WORK/long.txt" || true)
[ -z "$long_functions" ] || fail "functions over 80 lines (split them into named steps):
$long_functions"
echo "code size: no file over 500 lines, no function over 80 but the tables ($allowed_long)"
