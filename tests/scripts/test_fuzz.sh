# ctest: timeout 1100; labels fuzz
# The libFuzzer harnesses (tests/fuzz/run.sh: the INI parser and schema, the
# Accelerate YAML, DeepSpeed and Trainer JSON readers and tables, the
# checkpoint manifest and attribute decoder, the safetensors reader, the token
# file and the IDX readers, a model directory's config.json), each for FUZZ_SECONDS (20) under ASan and UBSan
# after replaying every kept regression input; a crash fails the test and is
# kept in tests/fuzz/regressions/NAME for committing.
source "$(dirname "$0")/lib.sh" "$1"
bash "$SOURCE_DIR/tests/fuzz/run.sh" "$BUILD_DIR" "${FUZZ_SECONDS:-20}"
