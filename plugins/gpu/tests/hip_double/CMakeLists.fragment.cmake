# The HIP test double, the HIP program the tests run, and the double's selftest. Included by the GPU
# plugin's tests, which have found HIP's headers (hip_include_directory) and Debian's real runtime
# (hip_runtime_library: the full path of libamdhip64.so). Sources are named from this file's own
# directory, so the includer may be any directory; outputs go to the includer's binary directory.
cmake_path(GET CMAKE_CURRENT_LIST_DIR PARENT_PATH gpu_tests_directory)

# libamdhip64.so.5, alone in its directory: a program linked against the real runtime runs against
# the double with LD_LIBRARY_PATH=$<TARGET_FILE_DIR:kairos_hip_double>. The version script gives the
# symbols the real runtime's versions.
add_library(kairos_hip_double SHARED ${CMAKE_CURRENT_LIST_DIR}/hip_double.cpp)
set_target_properties(kairos_hip_double PROPERTIES
  OUTPUT_NAME amdhip64
  SOVERSION 5
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/hip_double
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/hip_double.map)
target_include_directories(kairos_hip_double SYSTEM PRIVATE ${hip_include_directory})
target_compile_definitions(kairos_hip_double PRIVATE __HIP_PLATFORM_AMD__=1)
target_link_options(kairos_hip_double PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/hip_double.map" "LINKER:--no-undefined")
target_link_libraries(kairos_hip_double PRIVATE Threads::Threads)

# hip_program: a host-only HIP program linked against the real runtime. ENABLE_EXPORTS links it
# with -rdynamic, so its kernels' addresses resolve to dynamic symbols.
add_executable(kairos_hip_program ${gpu_tests_directory}/hip_program.cpp)
set_target_properties(kairos_hip_program PROPERTIES OUTPUT_NAME hip_program ENABLE_EXPORTS ON)
target_include_directories(kairos_hip_program SYSTEM PRIVATE ${hip_include_directory})
target_compile_definitions(kairos_hip_program PRIVATE __HIP_PLATFORM_AMD__=1)
target_link_libraries(kairos_hip_program PRIVATE ${hip_runtime_library})

# The double's selftest, linked against the double. LD_LIBRARY_PATH names the double's directory
# too, so that no runtime named by the caller's LD_LIBRARY_PATH (ROCm's, say) is loaded instead.
add_executable(kairos_hip_double_selftest ${gpu_tests_directory}/hip_double_selftest.cpp)
target_include_directories(kairos_hip_double_selftest SYSTEM PRIVATE ${hip_include_directory})
target_compile_definitions(kairos_hip_double_selftest PRIVATE __HIP_PLATFORM_AMD__=1)
target_link_libraries(kairos_hip_double_selftest PRIVATE kairos_hip_double doctest::doctest
  Threads::Threads)
add_test(NAME "gpu: hip double selftest" COMMAND kairos_hip_double_selftest)
set_tests_properties("gpu: hip double selftest" PROPERTIES TIMEOUT 60
  ENVIRONMENT "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:kairos_hip_double>")
