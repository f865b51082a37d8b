# mpiaccel_module(NAME DEPS ...): one static library per folder src/NAME, so the
# one-way module dependencies of DESIGN.md §2 are enforced by the linker.
function(mpiaccel_module name)
  cmake_parse_arguments(M "" "" "DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${name}/*.cpp)
  add_library(mpiaccel_${name} STATIC ${sources})
  target_include_directories(mpiaccel_${name}
    PUBLIC ${CMAKE_SOURCE_DIR}/include
    PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(mpiaccel_${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_compile_options(mpiaccel_${name} PUBLIC ${MPIACCEL_TORCH_CXX_FLAGS})
  target_compile_definitions(mpiaccel_${name} PRIVATE
    MPIACCEL_VERSION="${PROJECT_VERSION}")
  set_target_properties(mpiaccel_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(mpiaccel_${name} PUBLIC ${M_DEPS} PRIVATE ${M_PRIVATE_DEPS})
endfunction()

# mpiaccel_executable(NAME SOURCES... DEPS ...)
function(mpiaccel_executable name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${M_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${MPIACCEL_WARNINGS})
  target_link_libraries(${name} PRIVATE ${M_DEPS})
endfunction()
