# The host AdamW benchmark (ZeRO-Offload's optimizer step): ours against
# torch::optim::AdamW on one 10M-element shard, 1 and 2 threads. Included from
# bench/CMakeLists.txt (include(${CMAKE_CURRENT_SOURCE_DIR}/fsdp/host_adamw.cmake))
# or from bench/fsdp/CMakeLists.txt (include(host_adamw.cmake)).
mpiaccel_executable(bench_host_adamw
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_adamw.cpp
  DEPS mpiaccel)
add_custom_target(bench_host_adamw_run
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/bench
  COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=2 $<TARGET_FILE:bench_host_adamw>
          --csv ${CMAKE_BINARY_DIR}/bench/host_adamw.csv
  DEPENDS bench_host_adamw
  USES_TERMINAL
  COMMENT "host AdamW benchmark: ours vs torch::optim::AdamW, 1 and 2 threads")
add_dependencies(bench bench_host_adamw_run)
