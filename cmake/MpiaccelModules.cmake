set(MPIACCEL_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# __FILE__ (in error messages' file:line) relative to the source tree: the
# installed library names no path of the tree it was built in, and ccache
# objects are the same whichever checkout compiled them.
add_compile_options(-fmacro-prefix-map=${CMAKE_SOURCE_DIR}/=)
# mpiaccel_module(NAME DEPS ...): the sources of folder src/NAME as an object
# library (mpiaccel_obj_NAME). DEPS are the modules above it in DESIGN.md §2
# and the outside libraries it compiles against; they give it their include
# directories and definitions. Every module's objects go into the one library
# users link, `mpiaccel` (mpiaccel_library below).
function(mpiaccel_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(mpiaccel_obj_${name} OBJECT ${sources})
  target_include_directories(mpiaccel_obj_${name}
    PUBLIC ${CMAKE_SOURCE_DIR}/include ${MPIACCEL_GENERATED_INCLUDE_DIR}
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(mpiaccel_obj_${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_compile_options(mpiaccel_obj_${name} PUBLIC ${MPIACCEL_TORCH_CXX_FLAGS})
  set_target_properties(mpiaccel_obj_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(mpiaccel_obj_${name} PUBLIC ${M_DEPS})
  set_property(GLOBAL APPEND PROPERTY MPIACCEL_MODULE_TARGETS mpiaccel_obj_${name})
endfunction()

# mpiaccel_executable(NAME SOURCES... DEPS ...): one of the project's own
# programs (a benchmark, a test helper), which may use the internals.
function(mpiaccel_executable name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${M_SOURCES})
  target_compile_options(${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_link_libraries(${name} PRIVATE mpiaccel_internal ${M_DEPS})
endfunction()
