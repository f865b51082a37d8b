# libmpiaccel: the one library a user links (shared by default, static with
# -DMPIACCEL_SHARED=OFF), made of every module's objects, and the rules that
# install it as a relocatable CMake package (find_package(mpiaccel)) and a
# pkg-config file (mpiaccel.pc). Included from the top-level CMakeLists after
# every module is declared.

if(MPIACCEL_SHARED)
  add_library(mpiaccel SHARED)
else()
  add_library(mpiaccel STATIC)
endif()
add_library(mpiaccel::mpiaccel ALIAS mpiaccel)
get_property(mpiaccel_module_targets GLOBAL PROPERTY MPIACCEL_MODULE_TARGETS)
foreach(module IN LISTS mpiaccel_module_targets)
  target_sources(mpiaccel PRIVATE $<TARGET_OBJECTS:${module}>)
endforeach()
set_target_properties(mpiaccel PROPERTIES
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  POSITION_INDEPENDENT_CODE ON
  EXPORT_NAME mpiaccel)
target_include_directories(mpiaccel PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
  $<BUILD_INTERFACE:${MPIACCEL_GENERATED_INCLUDE_DIR}>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# What a user's program needs: LibTorch (its `torch` target carries the
# include directories and the C++ ABI flag) and MPI. The rest is linked
# privately, by file path, so that a static libmpiaccel's exported link line
# names no target the user's project would have to recreate.
target_link_libraries(mpiaccel
  PUBLIC torch MPI::MPI_CXX
  PRIVATE ${INIH_LINK_LIBRARIES} ${YAMLCPP_LINK_LIBRARIES} ${HDF5_C_LIBRARIES} ${ZLIB_LIBRARIES} ${CMAKE_DL_LIBS})
# libstdc++ before LibTorch in users' programs too (MpiaccelDependencies.cmake).
target_link_options(mpiaccel INTERFACE ${MPIACCEL_STDCXX_FIRST})
# The tokenizer's SentencePiece module, loaded at run time from beside the
# library (src/data/CMakeLists.txt says why it is not linked).
add_dependencies(mpiaccel mpiaccel_sentencepiece)
if(MPIACCEL_HAVE_NCCL)
  target_link_libraries(mpiaccel PRIVATE ${NCCL_LIBRARY} ${CUDA_cudart_LIBRARY})
endif()

# ---- install ---------------------------------------------------------------
include(CMakePackageConfigHelpers)
set(MPIACCEL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mpiaccel)

# The installed command and any program built against the installed library
# find libmpiaccel next to them; LibTorch and the other outside libraries by
# the directories they were linked from. CMake leaves out link directories
# inside the source tree, where the torch wheel's LibTorch (.venv) and its
# NCCL lie, so those are named explicitly.
get_filename_component(mpiaccel_torch_libdir "${TORCH_LIBRARY}" DIRECTORY)
set(mpiaccel_outside_rpath "${mpiaccel_torch_libdir}")
if(MPIACCEL_HAVE_NCCL)
  get_filename_component(mpiaccel_nccl_libdir "${NCCL_LIBRARY}" DIRECTORY)
  list(APPEND mpiaccel_outside_rpath "${mpiaccel_nccl_libdir}")
endif()
set(CMAKE_INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${mpiaccel_outside_rpath}")
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(mpiaccel PROPERTIES INSTALL_RPATH "$ORIGIN;${mpiaccel_outside_rpath}"
                                          INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS mpiaccel EXPORT mpiaccelTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/mpiaccel ${MPIACCEL_GENERATED_INCLUDE_DIR}/mpiaccel
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
install(EXPORT mpiaccelTargets NAMESPACE mpiaccel:: DESTINATION ${MPIACCEL_CMAKE_DIR})

# A hint for find_dependency(Torch): the LibTorch we built with, unless it is
# on CMake's default search path anyway. It may lie inside the source tree
# (the torch wheel in .venv): then the installed package names that one path
# of the tree, the LibTorch it needs.
set(MPIACCEL_TORCH_DIR_HINT "")
if(Torch_DIR)
  file(REAL_PATH "${Torch_DIR}" MPIACCEL_TORCH_DIR_HINT)
endif()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mpiaccelConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/mpiaccelConfig.cmake
  INSTALL_DESTINATION ${MPIACCEL_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/mpiaccelConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/mpiaccelConfig.cmake
              ${CMAKE_BINARY_DIR}/package/mpiaccelConfigVersion.cmake
  DESTINATION ${MPIACCEL_CMAKE_DIR})

# pkg-config: LibTorch has no .pc file, so its flags are written out here.
set(MPIACCEL_PC_TORCH_CFLAGS "${TORCH_CXX_FLAGS}")
foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
  string(APPEND MPIACCEL_PC_TORCH_CFLAGS " -I${dir}")
endforeach()
set(MPIACCEL_PC_TORCH_LIBS "-L${mpiaccel_torch_libdir} -Wl,-rpath,${mpiaccel_torch_libdir} -ltorch -ltorch_cpu -lc10")
configure_file(${CMAKE_SOURCE_DIR}/cmake/mpiaccel.pc.in ${CMAKE_BINARY_DIR}/package/mpiaccel.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/mpiaccel.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# What the project's own programs (the command, tests, benchmarks) link: the
# library plus its internals' headers (src/) and the outside headers they
# include (parallel HDF5, NCCL). Users never see this target.
add_library(mpiaccel_internal INTERFACE)
target_include_directories(mpiaccel_internal INTERFACE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(mpiaccel_internal INTERFACE mpiaccel mpiaccel::hdf5)
if(MPIACCEL_HAVE_NCCL)
  target_link_libraries(mpiaccel_internal INTERFACE mpiaccel::nccl CUDA::cudart)
endif()
