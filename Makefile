# Thin wrapper around CMake/CTest. `make run` and `make test` are the quick start.

# Which LibTorch: pip (default) = the torch wheel pinned in
# requirements-torch.txt, installed by `make deps` into $(VENV), LibTorch 2.x
# with CUDA (runs on the CPU where there is no GPU); debian = Debian's
# libtorch-dev 1.13 (CPU only). Each has its own build directory.
TORCH      ?= pip
VENV       ?= .venv
ifeq ($(TORCH),debian)
BUILD      ?= build-debian
TORCH_CMAKE_ARGS :=
else ifeq ($(TORCH),pip)
BUILD      ?= build
# The wheel's root goes first in CMAKE_PREFIX_PATH: TorchConfig looks for its
# libraries by name, and must not find another LibTorch's in /usr/lib.
TORCH_CMAKE_ARGS = -DCMAKE_PREFIX_PATH=$$($(VENV)/bin/python -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null)
else
$(error TORCH must be pip or debian, not '$(TORCH)')
endif
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
NP         ?= 2
MPIRUN     ?= mpirun
MPIRUN_ROOT := $(if $(filter 0,$(shell id -u)),--allow-run-as-root,)
MPIRUN_FLAGS ?= --oversubscribe --bind-to none $(MPIRUN_ROOT) -x OMP_NUM_THREADS=1
RUN_CONFIG ?= jobs/fortunes-gpt.ini
RUN_DIR    ?= runs/fortunes-gpt
PREFIX     ?= /usr/local

# Debian 12 packages: toolchain, LibTorch (CPU), Open MPI, parallel HDF5, inih,
# Boost.Test; OpenBLAS because Debian's LibTorch is linked against the reference
# BLAS through alternatives (an 8M-parameter MLP step: 812 ms → 166 ms);
# SentencePiece for `mpiaccel data tokenize`; the
# datasets; python3-torch and python3-h5py as the benchmark peer and the
# outside reader of our checkpoints; gnuplot for `mpiaccel plot`; iproute2,
# Slurm (slurmctld, slurmd, the client, the PMIx plugin) and munge for the
# cluster in a box (tools/cluster/cluster).
DEB_PACKAGES := build-essential cmake pkg-config ccache \
  libtorch-dev libopenblas0-openmp \
  libopenmpi-dev openmpi-bin \
  libhdf5-openmpi-dev hdf5-tools \
  libinih-dev libyaml-cpp-dev libboost-test-dev libsentencepiece-dev nlohmann-json3-dev \
  fortunes dataset-fashion-mnist \
  python3-torch python3-h5py gnuplot-nox python3-venv \
  iproute2 slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge \
  clang

# ccache keys on paths relative to the checkout, so a fresh clone elsewhere
# reuses the objects an earlier build compiled. Builds with debug info (the
# sanitizer build's -g1) would also hash the working directory: they map it
# away in the debug info instead (cmake/MpiaccelSanitizers.cmake), so ccache
# need not.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: all build build-command deps deps-apt deps-torch gpu-debs configure install test test-quick test-all test-sanitize fuzz bench run clean

all: build

deps: deps-apt deps-torch gpu-debs

# The Debian packages bench/gpu/run.sh unpacks on the GPU machine, which has
# no registry (bench/gpu/fetch_debs.sh; about 24 MB, in bench/gpu/debs).
gpu-debs: bench/gpu/debs/.fetched

bench/gpu/debs/.fetched: bench/gpu/fetch_debs.sh | deps-apt
	bash bench/gpu/fetch_debs.sh
	touch $@

deps-apt:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	else echo "make deps: all $(words $(DEB_PACKAGES)) packages present"; fi

# The pinned torch wheel (LibTorch 2.x) in a project-local virtual
# environment, made with Debian's python3 (about 4.6 GB with the CUDA runtime
# libraries it pulls; 6 minutes here). Redone when the pin changes.
deps-torch: $(VENV)/.torch-installed

$(VENV)/.torch-installed: requirements-torch.txt | deps-apt
	test -x $(VENV)/bin/python || /usr/bin/python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r requirements-torch.txt
	$(VENV)/bin/python -c 'import torch; print("make deps: torch", torch.__version__, "in $(VENV)")'
	touch $@

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(TORCH_CMAKE_ARGS) $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Only what `make run` runs: the mpiaccel command and the library (with its
# run-time SentencePiece module), not the tests and benchmarks.
build-command: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target mpiaccel_tool

# The headers, libmpiaccel, the mpiaccel command, the CMake package and the
# pkg-config file (docs/api.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Everything but the tests that need a GPU (label gpu) or are long (label long,
# run by `make bench`).
test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 600 -j$(JOBS) -LE 'gpu|long'

# The libFuzzer harnesses for longer than make test's 20 s each
# (tests/fuzz/run.sh): FUZZ_SECONDS per harness; a crash is kept in
# tests/fuzz/regressions/NAME, to be committed with its fix.
FUZZ_SECONDS ?= 300
fuzz: $(BUILD)/CMakeCache.txt
	bash tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

# A few minutes' subset: the unit tests and the core multi-rank suites at np 2
# (CI runs it on the second, Debian-LibTorch build).
# It builds only the test programs (not the tools, benchmarks and examples).
QUICK_TESTS ?= ^unit_|_np2$$
test-quick: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target mpiaccel_test_programs
	ctest --test-dir $(BUILD) --output-on-failure --timeout 600 -j$(JOBS) -LE 'gpu|long|script' -R '$(QUICK_TESTS)'

# The unit tests and the np 1-2 MPI tests built with AddressSanitizer and
# UndefinedBehaviorSanitizer in their own build directory (CI runs it). Any
# report fails the test; Open MPI's and HDF5's leaks at exit are suppressed
# by library name in tests/sanitize/lsan.supp (README, Testing).
SANITIZE_BUILD ?= build-sanitize
SANITIZE_TESTS ?= ^unit_|_np[12]$$
# SentencePiece is loaded with dlopen(RTLD_DEEPBIND) (src/data/sentencepiece_api.cpp:
# it must bind to its own protobuf, not LibTorch's), which ASan cannot run
# (google/sanitizers#611): the tokenizer's unit test is left out.
SANITIZE_EXCLUDE ?= ^unit_test_tokenizer$$
# Open MPI and PMIx keep their components loaded (disable_dlclose), and the
# allocation stacks are unwound fully (fast_unwind_on_malloc=0: the outside
# libraries have no frame pointers), so every leak report names its library.
SANITIZE_ENV := OMPI_MCA_mca_base_component_disable_dlclose=1 \
  PMIX_MCA_mca_base_component_disable_dlclose=1 \
  ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitize/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitize/ubsan.supp:print_stacktrace=1:halt_on_error=1
test-sanitize: deps-torch
	$(MAKE) configure BUILD=$(SANITIZE_BUILD) \
	  CMAKE_ARGS="-DMPIACCEL_SANITIZE=address,undefined -DMPIACCEL_WITH_NCCL=OFF $(CMAKE_ARGS)"
	cmake --build $(SANITIZE_BUILD) -j$(JOBS) --target mpiaccel_test_programs
	$(SANITIZE_ENV) ctest --test-dir $(SANITIZE_BUILD) --output-on-failure --timeout 600 -j$(JOBS) \
	  -LE 'gpu|long|script' -R '$(SANITIZE_TESTS)' -E '$(SANITIZE_EXCLUDE)'

test-all: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) -LE gpu

bench: build
	bash bench/run_all.sh $(BUILD)

run: deps build-command
	@mkdir -p $(RUN_DIR)
	$(MPIRUN) -np $(NP) $(MPIRUN_FLAGS) $(BUILD)/bin/mpiaccel train --config $(RUN_CONFIG) \
	  logging.metrics_file=$(RUN_DIR)/metrics.jsonl checkpoint.dir=$(RUN_DIR)/checkpoints

clean:
	rm -rf $(BUILD)
