# Finds every dependency of mpiaccel and fails with a message that says what to
# install. CUDA and NCCL are optional (MPIACCEL_WITH_NCCL).

# LibTorch: Debian's libtorch-dev by default; any other through Torch_DIR or
# CMAKE_PREFIX_PATH (e.g. the one inside a Python torch wheel).
find_package(Torch REQUIRED)
# TORCH_CXX_FLAGS carries the libstdc++ ABI flag the LibTorch was built with.
separate_arguments(MPIACCEL_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

find_package(MPI REQUIRED COMPONENTS C CXX)

set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "mpiaccel needs a parallel (MPI) build of HDF5, but the HDF5 found at "
    "'${HDF5_INCLUDE_DIRS}' is serial. On Debian: apt-get install libhdf5-openmpi-dev; "
    "elsewhere point HDF5_ROOT at a parallel HDF5.")
endif()
add_library(mpiaccel::hdf5 INTERFACE IMPORTED)
target_include_directories(mpiaccel::hdf5 INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(mpiaccel::hdf5 INTERFACE ${HDF5_C_LIBRARIES} MPI::MPI_C)
target_compile_definitions(mpiaccel::hdf5 INTERFACE ${HDF5_DEFINITIONS} H5_USE_110_API_DEFAULT=0)

find_package(PkgConfig REQUIRED)
pkg_check_modules(INIH REQUIRED IMPORTED_TARGET inih)
# SentencePiece: the BPE tokenizer of `mpiaccel data tokenize` and
# mpiaccel::Tokenizer (Debian: libsentencepiece-dev). Its types stay out of the
# public headers (pimpl); it is linked only into the module
# libmpiaccel_sentencepiece, which libmpiaccel loads at run time (src/data).
pkg_check_modules(SENTENCEPIECE IMPORTED_TARGET sentencepiece)
if(NOT SENTENCEPIECE_FOUND)
  message(FATAL_ERROR "mpiaccel needs SentencePiece (sentencepiece.pc not found). On Debian: "
    "apt-get install libsentencepiece-dev (or make deps); elsewhere add its prefix to "
    "PKG_CONFIG_PATH.")
endif()

find_package(Boost REQUIRED COMPONENTS unit_test_framework)

# CUDA + NCCL: AUTO builds the NCCL communicator when both are found.
set(MPIACCEL_HAVE_NCCL OFF)
if(NOT MPIACCEL_WITH_NCCL STREQUAL "OFF")
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(MPIACCEL_HAVE_NCCL ON)
    add_library(mpiaccel::nccl INTERFACE IMPORTED)
    target_include_directories(mpiaccel::nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(mpiaccel::nccl INTERFACE ${NCCL_LIBRARY})
    message(STATUS "mpiaccel: NCCL communicator ON (CUDA ${CUDAToolkit_VERSION}, ${NCCL_LIBRARY})")
  elseif(MPIACCEL_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "MPIACCEL_WITH_NCCL=ON but CUDA (found: ${CUDAToolkit_FOUND}) or NCCL "
      "(nccl.h: ${NCCL_INCLUDE_DIR}, libnccl: ${NCCL_LIBRARY}) is missing; set CUDAToolkit_ROOT "
      "and NCCL_ROOT, or configure with -DMPIACCEL_WITH_NCCL=OFF.")
  else()
    message(STATUS "mpiaccel: NCCL communicator OFF (CUDA or NCCL not found)")
  endif()
endif()

set(MPIACCEL_WARNINGS -Wall -Wextra -Wno-unused-parameter)
