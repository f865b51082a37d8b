# MPIACCEL_SANITIZE: a comma-separated list of sanitizers every target of the
# project is compiled and linked with (`make test-sanitize` builds
# build-sanitize with address,undefined). Any sanitizer report aborts the
# program (-fno-sanitize-recover), so a test that triggers one fails.
# Reports from outside libraries (Open MPI, LibTorch) are suppressed only in
# tests/sanitize/*.supp, by library name, never by turning a check off.
set(MPIACCEL_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
if(MPIACCEL_SANITIZE)
  # -g1 for the reports' file:line. Its debug info names the checkout relative
  # to itself (-fdebug-prefix-map), and ccache does not hash the working
  # directory (CCACHE_NOHASHDIR, set by the Makefile): a fresh clone elsewhere
  # reuses the objects an earlier clone compiled.
  set(MPIACCEL_SANITIZE_FLAGS -fsanitize=${MPIACCEL_SANITIZE} -fno-sanitize-recover=all
      -fno-omit-frame-pointer -O1 -g1 -fdebug-prefix-map=${CMAKE_SOURCE_DIR}=.)
  add_compile_options(${MPIACCEL_SANITIZE_FLAGS})
  add_link_options(-fsanitize=${MPIACCEL_SANITIZE})
  message(STATUS "mpiaccel: sanitizers ${MPIACCEL_SANITIZE}")
endif()
