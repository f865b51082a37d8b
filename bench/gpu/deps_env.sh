# Sourced by bench/gpu/run.sh (and by tests/scripts/test_gpu_deps_rehearsal.sh,
# which rehearses it here with the system's MPI and HDF5 hidden): the Debian
# packages of bench/gpu/debs unpacked into a prefix, never into /, and the
# environment that makes the relocated Open MPI, PMIx, HDF5 and pkg-config
# work from there. Set DEBS and PREFIX before sourcing.
#
# Relocation: Open MPI finds its plugins, help files and wrapper-compiler
# data under OPAL_PREFIX; PMIx does not follow it, so its plugins are named
# by PMIX_MCA_mca_base_component_path; pkg-config prefixes the .pc files' /usr
# paths with PKG_CONFIG_SYSROOT_DIR. The multiarch triplet is Debian's.

GPU_DEPS_LIB=$PREFIX/usr/lib/x86_64-linux-gnu

# unpack_debs: every $DEBS/*.deb into $PREFIX (dpkg-deb, or ar + tar where
# the machine has no dpkg). Fails when there are none.
unpack_debs() {
  local deb
  ls "$DEBS"/*.deb > /dev/null 2>&1 || {
    echo "no packages in $DEBS: run 'make gpu-debs' where Debian's registry is, and carry bench/gpu/debs" >&2
    return 1
  }
  mkdir -p "$PREFIX"
  for deb in "$DEBS"/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$deb" "$PREFIX" || return 1
    else
      (cd "$PREFIX" && ar p "$deb" "$(ar t "$deb" | grep '^data.tar')" | tar -xJf -) || return 1
    fi
  done
}

export OPAL_PREFIX=$PREFIX/usr
export PMIX_MCA_mca_base_component_path=$GPU_DEPS_LIB/pmix2/lib/pmix
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$GPU_DEPS_LIB:$GPU_DEPS_LIB/openmpi/lib:$GPU_DEPS_LIB/hdf5/openmpi/lib:$GPU_DEPS_LIB/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$GPU_DEPS_LIB/pkgconfig:$PREFIX/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$PREFIX
# CMake searches the environment's prefixes after the command line's (run.sh
# names the LibTorch there): Boost's package files, and the rest by hint.
export CMAKE_PREFIX_PATH=$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# What CMake needs to find them (the Debian names carry the .openmpi suffix:
# the plain names are alternatives a package script would have made).
GPU_DEPS_CMAKE_FLAGS=(
  "-DMPI_C_COMPILER=$PREFIX/usr/bin/mpicc.openmpi"
  "-DMPI_CXX_COMPILER=$PREFIX/usr/bin/mpicxx.openmpi"
  "-DMPIEXEC_EXECUTABLE=$PREFIX/usr/bin/mpirun.openmpi"
  "-DHDF5_ROOT=$GPU_DEPS_LIB/hdf5/openmpi"
  "-DPKG_CONFIG_EXECUTABLE=$PREFIX/usr/bin/pkgconf"
)

# gpu_deps_missing: the shared libraries the unpacked ones need that neither
# the prefix nor the machine has (empty when all are there).
gpu_deps_missing() {
  local lib
  for lib in "$GPU_DEPS_LIB"/lib{mpi,hdf5_openmpi,INIReader,boost_unit_test_framework,sentencepiece}.so.* \
             "$GPU_DEPS_LIB"/pmix2/lib/libpmix.so.*; do
    ldd "$lib" 2> /dev/null | grep 'not found'
  done | sort -u
}
