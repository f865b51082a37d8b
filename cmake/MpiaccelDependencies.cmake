# Finds every dependency of mpiaccel and fails with a message that says what to
# install. CUDA and NCCL are optional (MPIACCEL_WITH_NCCL).

# LibTorch: the one Torch_DIR or CMAKE_PREFIX_PATH points at (`make build`:
# the torch wheel in .venv; `make build TORCH=debian`: Debian's libtorch-dev,
# found without a hint).
# TorchConfig finds its libraries by name, system paths before its own: with
# only Torch_DIR given, its root goes first in CMAKE_PREFIX_PATH, so Debian's
# /usr/lib/libtorch.so is never linked with another LibTorch's headers.
if(Torch_DIR)
  get_filename_component(mpiaccel_torch_root "${Torch_DIR}/../../.." ABSOLUTE)
  list(PREPEND CMAKE_PREFIX_PATH "${mpiaccel_torch_root}")
endif()
find_package(Torch REQUIRED)
# TORCH_CXX_FLAGS carries the libstdc++ ABI flag the LibTorch was built with.
separate_arguments(MPIACCEL_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
# A LibTorch built with CUDA (the wheel's) has the torch_cuda library; it runs
# on the CPU where there is no GPU.
if(TARGET torch_cuda OR "${TORCH_LIBRARIES}" MATCHES "torch_cuda")
  set(MPIACCEL_TORCH_CUDA ON)
else()
  set(MPIACCEL_TORCH_CUDA OFF)
endif()
message(STATUS "mpiaccel: LibTorch ${Torch_VERSION} (CUDA: ${MPIACCEL_TORCH_CUDA}) from ${Torch_DIR}")
# The torch wheel's libtorch.so exports a copy of std::filesystem (a static
# libstdc++fs of the wheel's own GCC) that crashes here (remove_all calls
# through a null pointer). Whichever library comes first in a program's
# NEEDED list wins the lookup, so every program and library links libstdc++
# first: the system's std::filesystem is then the one used. mpiaccel's target
# passes the same flags on to users' programs (and the .pc file writes them).
set(MPIACCEL_STDCXX_FIRST "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
add_link_options(${MPIACCEL_STDCXX_FIRST})
# A wheel's LibTorch links the NCCL of the nvidia-nccl wheel beside it: the
# NCCL communicator uses that one too, so one process never loads two.
get_filename_component(mpiaccel_site_packages "${Torch_DIR}/../../../.." ABSOLUTE)
if(NOT NCCL_ROOT AND EXISTS "${mpiaccel_site_packages}/nvidia/nccl/include/nccl.h")
  set(NCCL_ROOT "${mpiaccel_site_packages}/nvidia/nccl")
endif()

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
# yaml-cpp: Accelerate's YAML config files (src/config/yaml_source.cpp).
pkg_check_modules(YAMLCPP IMPORTED_TARGET yaml-cpp)
if(NOT YAMLCPP_FOUND)
  message(FATAL_ERROR "mpiaccel needs yaml-cpp (yaml-cpp.pc not found). On Debian: apt-get install "
    "libyaml-cpp-dev (or make deps); elsewhere add its prefix to PKG_CONFIG_PATH.")
endif()
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
# nlohmann/json (header-only): the JSON of safetensors headers and of Hugging
# Face model directories (src/interop/safetensors.cpp, the HF export).
find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "mpiaccel needs nlohmann/json 3 (nlohmann_jsonConfig.cmake not found). On "
    "Debian: apt-get install nlohmann-json3-dev (or make deps); elsewhere add its prefix to "
    "CMAKE_PREFIX_PATH.")
endif()

# CUDA + NCCL: AUTO builds the NCCL communicator when both are found and the
# LibTorch has CUDA (the communicator orders its stream with c10::cuda's
# streams and caching allocator; a CPU LibTorch has no CUDA tensors to move).
set(MPIACCEL_HAVE_NCCL OFF)
if(MPIACCEL_WITH_NCCL STREQUAL "ON" AND NOT MPIACCEL_TORCH_CUDA)
  message(FATAL_ERROR "MPIACCEL_WITH_NCCL=ON needs a LibTorch built with CUDA, but "
    "${Torch_DIR} has none; point CMAKE_PREFIX_PATH at a CUDA LibTorch (make build uses the "
    "torch wheel), or configure with -DMPIACCEL_WITH_NCCL=OFF.")
endif()
if(NOT MPIACCEL_WITH_NCCL STREQUAL "OFF" AND MPIACCEL_TORCH_CUDA)
  if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  # The wheel ships only libnccl.so.2 (no unversioned link).
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR HINTS ${NCCL_ROOT} ENV NCCL_ROOT
               ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
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
