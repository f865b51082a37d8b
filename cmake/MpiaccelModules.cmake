set(MPIACCEL_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# __FILE__ (in error messages' file:line) relative to the source tree: the
# installed library names no path of the tree it was built in, and ccache
# objects are the same whichever checkout compiled them.
add_compile_options(-fmacro-prefix-map=${CMAKE_SOURCE_DIR}/=)

# mpiaccel_module(NAME [USES module...] [HEADERS name.hpp...] [LIBS target...])
# The sources of folder src/NAME as an object library (mpiaccel_obj_NAME).
# USES: the modules before it that it builds on (docs/design.md, "Modules");
# it may include the headers of exactly these (what it includes of a module,
# it names, even when a module it uses uses that one too) and nothing else
# of the project. HEADERS: the public headers under
# include/mpiaccel/ that it owns. LIBS: outside libraries it compiles
# against. cmake/check_modules.py holds every #include of src/, include/ and
# tools/ to this table when the library is built (MpiaccelModuleCheck.cmake).
# Every module's objects go into the one library users link, `mpiaccel`
# (MpiaccelLibrary.cmake).
#
# SUBDIRS: folders of src/NAME whose sources are the module's too (a large
# module's seams: src/checkpoint/save, ...). ALONE: its sources (names in
# src/NAME) that compile on their own, outside the unity batches: a file
# with compile options of its own (set_source_files_properties) must be,
# or a batch would compile it without them.
function(mpiaccel_module name)
  cmake_parse_arguments(M "" "" "USES;HEADERS;LIBS;SUBDIRS;ALONE" ${ARGN})
  set(globs ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  foreach(subdir ${M_SUBDIRS})
    list(APPEND globs ${CMAKE_SOURCE_DIR}/src/${name}/${subdir}/*.cpp)
  endforeach()
  file(GLOB sources CONFIGURE_DEPENDS ${globs})
  list(TRANSFORM M_ALONE PREPEND ${CMAKE_SOURCE_DIR}/src/${name}/ OUTPUT_VARIABLE alone)
  if(alone)
    list(REMOVE_ITEM sources ${alone})
  endif()
  mpiaccel_unity_sources(sources ${name} ${CMAKE_SOURCE_DIR}/src ${sources})
  add_library(mpiaccel_obj_${name} OBJECT ${sources} ${alone})
  target_include_directories(mpiaccel_obj_${name}
    PUBLIC ${CMAKE_SOURCE_DIR}/include ${MPIACCEL_GENERATED_INCLUDE_DIR}
    PRIVATE ${CMAKE_SOURCE_DIR}/src ${MPIACCEL_PRIVATE_GENERATED_DIR})
  target_compile_options(mpiaccel_obj_${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_compile_options(mpiaccel_obj_${name} PUBLIC ${MPIACCEL_TORCH_CXX_FLAGS})
  set_target_properties(mpiaccel_obj_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  list(TRANSFORM M_USES PREPEND mpiaccel_obj_ OUTPUT_VARIABLE used_targets)
  target_link_libraries(mpiaccel_obj_${name} PUBLIC ${used_targets} ${M_LIBS})
  set_property(GLOBAL APPEND PROPERTY MPIACCEL_MODULE_TARGETS mpiaccel_obj_${name})
  mpiaccel_module_table_row(module ${name} src/${name} "${M_USES}" "${M_HEADERS}")
endfunction()

# Unity builds (MPIACCEL_UNITY, on by default): a module's sources are
# compiled in batches of MPIACCEL_UNITY_BATCH files, each batch one
# translation unit that includes them, so LibTorch's headers (the bulk of a
# file's compile time) are parsed once per batch instead of once per file
# (docs/benchmarks.md, "Build time"). CMake's own UNITY_BUILD writes absolute
# paths into its batch files, which differ between two clones and so miss
# ccache; these batch files include each source by its path below an include
# directory ("models/gpt.cpp" under src/), the same in every clone of the
# tree (and the same __FILE__ in error messages as file by file), and are
# rewritten only when their text changes. Sources of one module therefore share one
# namespace per batch: file-local names must not collide within a module.
# -DMPIACCEL_UNITY=OFF compiles file by file (an editor's compile_commands).
option(MPIACCEL_UNITY "Compile each module in batches of files (unity build)" ON)
set(MPIACCEL_UNITY_BATCH 4 CACHE STRING "Source files per unity batch")
if(NOT MPIACCEL_UNITY_BATCH MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "MPIACCEL_UNITY_BATCH = '${MPIACCEL_UNITY_BATCH}': give a whole number of files, 1 or more")
endif()

# mpiaccel_unity_sources(OUT_VAR NAME BASE SOURCES...): SOURCES, or with
# MPIACCEL_UNITY the batch files that include them (build/unity/NAME_N.cpp)
# by their paths below BASE, which must be an include directory of the target.
function(mpiaccel_unity_sources out name base)
  set(sources ${ARGN})
  list(LENGTH sources count)
  if(NOT MPIACCEL_UNITY OR count LESS 2)
    set(${out} ${sources} PARENT_SCOPE)
    return()
  endif()
  list(SORT sources)
  set(dir ${CMAKE_BINARY_DIR}/unity)
  set(batches "")
  set(text "")
  set(in_batch 0)
  set(index 0)
  foreach(source ${sources})
    file(RELATIVE_PATH relative ${base} ${source})
    string(APPEND text "#include \"${relative}\"\n")
    math(EXPR in_batch "${in_batch} + 1")
    if(in_batch EQUAL MPIACCEL_UNITY_BATCH)
      file(CONFIGURE OUTPUT ${dir}/${name}_${index}.cpp CONTENT "// Generated (MPIACCEL_UNITY).\n${text}")
      list(APPEND batches ${dir}/${name}_${index}.cpp)
      math(EXPR index "${index} + 1")
      set(text "")
      set(in_batch 0)
    endif()
  endforeach()
  if(in_batch GREATER 0)
    file(CONFIGURE OUTPUT ${dir}/${name}_${index}.cpp CONTENT "// Generated (MPIACCEL_UNITY).\n${text}")
    list(APPEND batches ${dir}/${name}_${index}.cpp)
  endif()
  set(${out} ${batches} PARENT_SCOPE)
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
