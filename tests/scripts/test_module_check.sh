# ctest: timeout 60
# The module order is enforced: the build runs cmake/check_modules.py over
# the tree before libmpiaccel links, and the check refuses each kind of
# undeclared dependency. Here it runs, exactly as the build runs it, on a
# copy of the tree with one deliberate violation at a time: each must fail
# with one line naming the file, the line and what is declared; the
# untouched copy must pass. A model family's name as a string literal
# outside its folder of src/models/families is refused too, and so is a
# config value's text compared outside src/config.
source "$(dirname "$0")/lib.sh" "$1"
table=$BUILD_DIR/module_table.txt
[ -f "$table" ] || fail "$table is missing: configure the build first"
grep -q check_modules.py "$BUILD_DIR"/CMakeFiles/mpiaccel_module_check.dir/build.make \
  || fail "the build does not run cmake/check_modules.py (target mpiaccel_module_check)"

fresh_tree() {  # a copy of what the check reads, in $WORK/tree
  rm -rf "$WORK/tree"
  mkdir -p "$WORK/tree/docs"
  cp -r "$SOURCE_DIR/src" "$SOURCE_DIR/include" "$SOURCE_DIR/tools" "$WORK/tree/"
  cp "$SOURCE_DIR/docs/design.md" "$WORK/tree/docs/"
  cp "$table" "$WORK/table.txt"
}
check() {
  python3 "$SOURCE_DIR/cmake/check_modules.py" --table "$WORK/table.txt" \
    --root "$WORK/tree" --design "$WORK/tree/docs/design.md" > "$WORK/out.txt" 2>&1
}
expect_refused() {  # expect_refused WHAT TEXT...: the check fails and says each TEXT
  local what=$1
  shift
  check && { cat "$WORK/out.txt"; fail "the check accepted $what"; }
  for text in "$@"; do expect_contains "$WORK/out.txt" "$text"; done
  echo "refused: $what"
}
add_line() {  # add_line FILE LINE: LINE as the file's first line
  sed -i "1i $2" "$WORK/tree/$1"
}

fresh_tree
check || { cat "$WORK/out.txt"; fail "the untouched tree does not pass the check"; }

fresh_tree
add_line src/state/param_list.cpp '#include "checkpoint/manifest/manifest.hpp"'
expect_refused "state including checkpoint's internals" \
  'src/state/param_list.cpp:1: #include "checkpoint/manifest/manifest.hpp": that is module checkpoint'"'"'s, but module state uses core runtime comm'

fresh_tree
add_line src/models/families/gpt/gpt.cpp '#include "mpiaccel/fsdp.hpp"'
expect_refused "models including a strategy's public header" \
  'src/models/families/gpt/gpt.cpp:1: #include "mpiaccel/fsdp.hpp": that is module fsdp'"'"'s, but module models uses core config runtime'

fresh_tree
add_line src/trainer/progress.cpp 'static const char* kFamily = "llama";  // the registry knows it'
expect_refused "a model family's name outside its folder" \
  'src/trainer/progress.cpp:1: "llama": a model family'"'"'s name outside its folder (src/models/families/llama)'

fresh_tree
add_line src/models/families/gpt/gpt.cpp 'static const char* kOther = "mlp";'
expect_refused "a family's folder naming another family" \
  'src/models/families/gpt/gpt.cpp:1: "mlp": a model family'"'"'s name outside its folder (src/models/families/mlp)'

fresh_tree
add_line src/models/families/gpt/gpt.cpp '// the "llama" family is in its own folder; a comment may say so'
check || { cat "$WORK/out.txt"; fail "a family's name in a comment was refused"; }

# A config value's text compared outside src/config: the config holds it as an enum.
fresh_tree
add_line src/trainer/progress.cpp 'static bool fsdp(const std::string& s) { return s == "fsdp"; }'
expect_refused "a config value compared as text outside src/config" \
  'src/trainer/progress.cpp:1: compares with "fsdp", a config value'"'"'s text'
fresh_tree
add_line tools/mpiaccel/launch_plan.cpp 'static bool hybrid(const std::string& s) { return "HYBRID_SHARD" != s; }'
expect_refused "the command comparing a config value as text" \
  'tools/mpiaccel/launch_plan.cpp:1: compares with "HYBRID_SHARD", a config value'"'"'s text'
fresh_tree
add_line src/config/derived.cpp 'static bool fsdp(const std::string& s) { return s == "fsdp"; }'
add_line src/models/families/gpt/hf_gpt2.cpp 'static bool exact(const std::string& s) { return s == "gelu"; }  // transformers'"'"' value'
add_line src/trainer/progress.cpp '// a comment may say strategy == "fsdp"'
check || { cat "$WORK/out.txt"; fail "src/config, a transformers mapping or a comment comparing a choice's text was refused"; }

fresh_tree
add_line include/mpiaccel/comm.hpp '#include "runtime/trace.hpp"'
expect_refused "a public header including an internal one" \
  'include/mpiaccel/comm.hpp:1: #include "runtime/trace.hpp": a public header includes an internal one'

fresh_tree
add_line tools/mpiaccel/main.cpp '#include "fsdp/fsdp_engine.hpp"'
expect_refused "the command including an undeclared module's internals" \
  "that is module fsdp's, but program command uses core interop trainer optim"

fresh_tree
sed -i 's/^module state src\/state core,runtime,comm /module state src\/state core,runtime,comm,checkpoint /' "$WORK/table.txt"
expect_refused "a cycle in USES" "module cycle: " \
  "module state USES checkpoint but includes nothing of it"

fresh_tree
printf '#pragma once\n' > "$WORK/tree/include/mpiaccel/orphan.hpp"
expect_refused "a public header that no module owns" \
  "include/mpiaccel/orphan.hpp: owned by no module" \
  "include/mpiaccel/orphan.hpp: not reached from include/mpiaccel/mpiaccel.hpp"

fresh_tree
sed -i 's/^| ddp | core, config, runtime, comm, precision, state, comm_hooks, grad_sync |/| ddp | core, config, runtime, comm, precision, state |/' "$WORK/tree/docs/design.md"
expect_refused "docs/design.md disagreeing with the build" \
  "docs/design.md: the module table says ddp uses comm config core precision runtime state; the build declares"
fresh_tree
add_line src/state/param_list.cpp '#include "../checkpoint/manifest.hpp"'
expect_refused "an include relative to the including folder that leaves it" \
  "src/state/param_list.cpp:1: #include \"../checkpoint/manifest.hpp\": an include climbs out of its folder with '../'"

fresh_tree
python3 - "$WORK/tree/docs/design.md" <<'PY'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
ddp = next(i for i, l in enumerate(lines) if l.startswith("| ddp |"))
state = next(i for i, l in enumerate(lines) if l.startswith("| state |"))
lines.insert(state, lines.pop(ddp))
open(path, "w").write("\n".join(lines))
PY
expect_refused "docs/design.md listing a module above one it uses" \
  "docs/design.md: the module table lists ddp above state, which it uses" \
  "docs/design.md: the module table's order"
echo "module check: every violation refused"
