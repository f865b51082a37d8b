# Thin wrapper around CMake/CTest. `make run` and `make test` are the quick start.

BUILD      ?= build
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
# outside reader of our checkpoints; gnuplot for `mpiaccel plot`.
DEB_PACKAGES := build-essential cmake pkg-config ccache \
  libtorch-dev libopenblas0-openmp \
  libopenmpi-dev openmpi-bin \
  libhdf5-openmpi-dev hdf5-tools \
  libinih-dev libboost-test-dev libsentencepiece-dev \
  fortunes dataset-fashion-mnist \
  python3-torch python3-h5py gnuplot-nox

# ccache keys on paths relative to the checkout, so a fresh clone elsewhere
# reuses the objects an earlier build compiled.
export CCACHE_BASEDIR := $(CURDIR)

.PHONY: all build deps configure install test test-all bench run clean

all: build

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	else echo "make deps: all $(words $(DEB_PACKAGES)) packages present"; fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# The headers, libmpiaccel, the mpiaccel command, the CMake package and the
# pkg-config file (docs/api.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Everything but the tests that need a GPU (label gpu) or are long (label long,
# run by `make bench`).
test: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 600 -j$(JOBS) -LE 'gpu|long'

test-all: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) -LE gpu

bench: build
	bash bench/run_all.sh $(BUILD)

run: deps build
	@mkdir -p $(RUN_DIR)
	$(MPIRUN) -np $(NP) $(MPIRUN_FLAGS) $(BUILD)/bin/mpiaccel train --config $(RUN_CONFIG) \
	  logging.metrics_file=$(RUN_DIR)/metrics.jsonl checkpoint.dir=$(RUN_DIR)/checkpoints

clean:
	rm -rf $(BUILD)
