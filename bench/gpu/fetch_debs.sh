#!/usr/bin/env bash
# Downloads, on a machine with Debian 12's package registry (this one; `make
# gpu-debs`), the Debian packages that bench/gpu/run.sh unpacks on the GPU
# machine, which has CUDA, Python's torch, CMake and ninja but no registry and
# no MPI, parallel HDF5, inih, yaml-cpp, Boost.Test or SentencePiece
# (docs/benchmarks.md, "GPU"). They land in bench/gpu/debs/ (git-ignored; the
# device call carries it: about 24 MB). Only what building and running
# mpiaccel needs, not the packages' whole dependency closure: the C and C++
# runtimes, zlib, OpenSSL and the like are on any CUDA image; run.sh checks
# the unpacked libraries with ldd and names any that are still missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/debs}
PACKAGES=(
  # Open MPI 4.1 and what libmpi and mpirun load
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libhwloc-plugins libpmix2
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1
  libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libnuma1 libmunge2 libltdl7
  libpciaccess0 libxnvctrl0
  # parallel HDF5 1.10
  libhdf5-openmpi-103-1 libhdf5-openmpi-dev libaec0 libsz2 libcurl4
  # inih, yaml-cpp, Boost.Test, SentencePiece, pkg-config, nlohmann/json
  libinih1 libinih-dev libyaml-cpp0.7 libyaml-cpp-dev libinireader0 libboost-test1.74.0 libboost-test1.74-dev libboost1.74-dev
  libsentencepiece0 libsentencepiece-dev pkgconf pkgconf-bin libpkgconf3 nlohmann-json3-dev
  # the text jobs/gpt2-small-gpu.ini trains on
  fortunes fortunes-min
)
mkdir -p "$dest"
cd "$dest"
# apt's sandbox user cannot write into a root-owned checkout.
apt-get download -o APT::Sandbox::User=root "${PACKAGES[@]}"
echo "fetch_debs: $(ls "$dest"/*.deb | wc -l) packages, $(du -sh "$dest" | cut -f1), in $dest"
