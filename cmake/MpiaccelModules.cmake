set(MPIACCEL_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# __FILE__ (in error messages' file:line) relative to the source tree: the
# installed library names no path of the tree it was built in, and ccache
# objects are the same whichever checkout compiled them.
add_compile_options(-fmacro-prefix-map=${CMAKE_SOURCE_DIR}/=)

# mpiaccel_module(NAME [USES module...] [HEADERS name.hpp...] [LIBS target...])
# The sources of folder src/NAME as an object library (mpiaccel_obj_NAME).
# USES: the modules below it that it builds on (docs/design.md, "Modules");
# it may include their headers and those of the modules they use, in turn,
# and nothing else of the project. HEADERS: the public headers under
# include/mpiaccel/ that it owns. LIBS: outside libraries it compiles
# against. cmake/check_modules.py holds every #include of src/, include/ and
# tools/ to this table when the library is built (MpiaccelModuleCheck.cmake).
# Every module's objects go into the one library users link, `mpiaccel`
# (MpiaccelLibrary.cmake).
function(mpiaccel_module name)
  cmake_parse_arguments(M "" "" "USES;HEADERS;LIBS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(mpiaccel_obj_${name} OBJECT ${sources})
  target_include_directories(mpiaccel_obj_${name}
    PUBLIC ${CMAKE_SOURCE_DIR}/include ${MPIACCEL_GENERATED_INCLUDE_DIR}
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(mpiaccel_obj_${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_compile_options(mpiaccel_obj_${name} PUBLIC ${MPIACCEL_TORCH_CXX_FLAGS})
  set_target_properties(mpiaccel_obj_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(TRANSFORM M_USES PREPEND mpiaccel_obj_ OUTPUT_VARIABLE used_targets)
  target_link_libraries(mpiaccel_obj_${name} PUBLIC ${used_targets} ${M_LIBS})
  set_property(GLOBAL APPEND PROPERTY MPIACCEL_MODULE_TARGETS mpiaccel_obj_${name})
  mpiaccel_module_table_row(module ${name} src/${name} "${M_USES}" "${M_HEADERS}")
endfunction()

# mpiaccel_program_uses(NAME DIR dir [USES module...]): a program of the
# project's own whose sources lie in DIR (the mpiaccel command). It may
# include every public header, and internal headers only of the modules it
# names (and of those they use).
function(mpiaccel_program_uses name)
  cmake_parse_arguments(M "" "DIR" "USES" ${ARGN})
  mpiaccel_module_table_row(program ${name} ${M_DIR} "${M_USES}" "")
endfunction()

# One row of the table the module check reads:
#   KIND NAME DIR USES(comma-separated) HEADERS(comma-separated)
function(mpiaccel_module_table_row kind name dir uses headers)
  string(REPLACE ";" "," uses "${uses}")
  string(REPLACE ";" "," headers "${headers}")
  if(uses STREQUAL "")
    set(uses "-")
  endif()
  if(headers STREQUAL "")
    set(headers "-")
  endif()
  set_property(GLOBAL APPEND PROPERTY MPIACCEL_MODULE_TABLE "${kind} ${name} ${dir} ${uses} ${headers}")
endfunction()

# mpiaccel_executable(NAME SOURCES... DEPS ...): one of the project's own
# programs (a benchmark, a test helper), which may use the internals.
function(mpiaccel_executable name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${M_SOURCES})
  target_compile_options(${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_link_libraries(${name} PRIVATE mpiaccel_internal ${M_DEPS})
endfunction()
