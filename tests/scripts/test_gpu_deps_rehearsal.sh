# ctest: timeout 300; lock cluster
# Rehearses, on this CPU machine, the part of bench/gpu/run.sh that cannot
# wait for a GPU: the GPU machine has no MPI, parallel HDF5, inih, Boost or
# SentencePiece, so the script brings them as Debian packages (make gpu-debs)
# unpacked into a prefix (bench/gpu/deps_env.sh). In a mount namespace where
# this machine's own Open MPI, PMIx and HDF5 are hidden, this test unpacks
# them the same way and
#   - builds an MPI + parallel HDF5 program with the unpacked mpicc and runs
#     it on 2 ranks with the unpacked mpirun (the relocated Open MPI and PMIx
#     start, find their plugins, and print no warning);
#   - configures a CMake project with run.sh's flags (GPU_DEPS_CMAKE_FLAGS)
#     that finds MPI, a parallel HDF5, inih, SentencePiece and Boost.Test
#     from the prefix, as the real configure does.
# Needs root (mount namespaces) and the packages: it fails, never skips,
# without them (make deps fetches them).
source "$(dirname "$0")/lib.sh" "$1"

DEBS=$SOURCE_DIR/bench/gpu/debs
ls "$DEBS"/*.deb > /dev/null 2>&1 || fail "no packages in $DEBS: run 'make gpu-debs' (make deps does)"
[ "$(id -u)" = 0 ] || fail "the rehearsal needs root for a mount namespace (unshare -m)"

cat > hello.c <<'EOF'
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);  // collective
  printf("rank %d of %d: sum %d, parallel file %s\n", rank, size, sum, file >= 0 ? "ok" : "failed");
  H5Fclose(file);
  H5Pclose(fapl);
  MPI_Finalize();
  return file >= 0 ? 0 : 1;
}
EOF
mkdir -p project
cat > project/CMakeLists.txt <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(rehearsal C CXX)
find_package(MPI REQUIRED COMPONENTS C CXX)
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "the HDF5 found (${HDF5_INCLUDE_DIRS}) is not parallel")
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
pkg_check_modules(YAMLCPP REQUIRED IMPORTED_TARGET yaml-cpp)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
find_package(Boost REQUIRED COMPONENTS unit_test_framework)
message(STATUS "rehearsal: MPI ${MPI_CXX_VERSION} ${MPI_CXX_INCLUDE_DIRS}; HDF5 ${HDF5_VERSION} ${HDF5_INCLUDE_DIRS}; inih ${INIH_INCLUDE_DIRS}; yaml-cpp ${YAMLCPP_LINK_LIBRARIES}; sentencepiece ${SENTENCEPIECE_LINK_LIBRARIES}; Boost ${Boost_VERSION} ${Boost_INCLUDE_DIRS}")
EOF

cat > inside.sh <<EOF
set -u
# This machine's Open MPI, PMIx and HDF5 out of sight, as on the GPU machine.
for dir in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 \\
           /usr/lib/x86_64-linux-gnu/hdf5 /usr/share/openmpi /usr/include/hdf5 /etc/openmpi \\
           /usr/include/boost /usr/lib/x86_64-linux-gnu/cmake; do
  [ -d "\$dir" ] && mount -t tmpfs none "\$dir"
done
for file in /usr/bin/mpirun /usr/bin/mpicc /usr/bin/mpicxx /usr/bin/orted /usr/bin/opal_wrapper \\
            /usr/bin/pkg-config /usr/bin/pkgconf; do
  [ -e "\$file" ] && mount --bind /dev/null "\$file"
done
DEBS=$DEBS PREFIX=$WORK/prefix
source "$SOURCE_DIR/bench/gpu/deps_env.sh"
unpack_debs || exit 1
missing=\$(gpu_deps_missing)
[ -z "\$missing" ] || { echo "missing libraries: \$missing"; exit 1; }
mpicc.openmpi hello.c -o hello -I\$GPU_DEPS_LIB/hdf5/openmpi/include -L\$GPU_DEPS_LIB/hdf5/openmpi/lib -lhdf5 || exit 1
ldd ./hello | grep -E 'libmpi|libhdf5'
# Shared memory between the ranks and loopback for the launch: the cluster
# tests add and remove interfaces (a bridge, veths) that TCP would otherwise
# try (CI saw MPI_ERR_OTHER once, a cluster test ending alongside). Not
# lib.sh's mpi: the unpacked mpirun.openmpi is what this rehearses, in a shell
# of its own where the system's mpirun is hidden.
mpirun.openmpi --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo -np 2 ./hello "$WORK/parallel.h5" || exit 1
cmake -S project -B project/build "\${GPU_DEPS_CMAKE_FLAGS[@]}" || exit 1
EOF
unshare -m bash inside.sh > out.txt 2>&1 || { cat out.txt; fail "the rehearsal of bench/gpu/deps_env.sh failed"; }
cat out.txt
expect_contains out.txt "rank 0 of 2: sum 1, parallel file ok"
expect_contains out.txt "rank 1 of 2: sum 1, parallel file ok"
expect_contains out.txt "libmpi.so.40 => $WORK/prefix/usr/lib/x86_64-linux-gnu/libmpi.so.40"
expect_contains out.txt "rehearsal: MPI 3.1 $WORK/prefix/usr/lib/x86_64-linux-gnu/openmpi/include"
expect_contains out.txt "HDF5 1.10.8 $WORK/prefix/usr/lib/x86_64-linux-gnu/hdf5/openmpi/include"
expect_contains out.txt "Boost 1.74.0 $WORK/prefix/usr/include"
if grep -qiE "couldn't open the help file|WARNING" out.txt; then fail "the relocated Open MPI or PMIx warned (above)"; fi
echo PASS
