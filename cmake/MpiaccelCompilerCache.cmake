# ccache makes rebuilds after a branch switch or a clean clone cheap: a LibTorch
# translation unit takes ~30 s to compile on a 2-core machine.
find_program(MPIACCEL_CCACHE ccache)
if(MPIACCEL_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${MPIACCEL_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${MPIACCEL_CCACHE})
endif()
