# The module check: cmake/check_modules.py holds every #include of src/,
# include/ and tools/ to the module table declared by mpiaccel_module and
# mpiaccel_program_uses (MpiaccelModules.cmake), and that table to the one in
# docs/design.md. It runs whenever a source changes, before libmpiaccel is
# linked, so an undeclared dependency fails the build
# (tests/scripts/test_module_check.sh shows it).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
get_property(mpiaccel_module_table GLOBAL PROPERTY MPIACCEL_MODULE_TABLE)
list(JOIN mpiaccel_module_table "\n" mpiaccel_module_table_text)
set(MPIACCEL_MODULE_TABLE ${CMAKE_BINARY_DIR}/module_table.txt)
file(CONFIGURE OUTPUT ${MPIACCEL_MODULE_TABLE} CONTENT "${mpiaccel_module_table_text}\n")
file(GLOB_RECURSE mpiaccel_checked_sources CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/src/*.cpp ${CMAKE_SOURCE_DIR}/src/*.hpp
  ${CMAKE_SOURCE_DIR}/include/*.hpp ${CMAKE_SOURCE_DIR}/tools/*.cpp ${CMAKE_SOURCE_DIR}/tools/*.hpp)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/module_check.stamp
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/cmake/check_modules.py
          --table ${MPIACCEL_MODULE_TABLE} --root ${CMAKE_SOURCE_DIR}
          --design ${CMAKE_SOURCE_DIR}/docs/design.md
          --stamp ${CMAKE_BINARY_DIR}/module_check.stamp
  DEPENDS ${mpiaccel_checked_sources} ${MPIACCEL_MODULE_TABLE}
          ${CMAKE_SOURCE_DIR}/cmake/check_modules.py ${CMAKE_SOURCE_DIR}/docs/design.md
  COMMENT "Checking the module order (cmake/check_modules.py)"
  VERBATIM)
add_custom_target(mpiaccel_module_check DEPENDS ${CMAKE_BINARY_DIR}/module_check.stamp)
add_dependencies(mpiaccel mpiaccel_module_check)
