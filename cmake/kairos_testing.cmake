# How every kairos test is registered with ctest.
#
# A test that cannot run here (no PMU, a dependency missing at configure time) prints a line
# starting KAIROS-TEST-SKIPPED: and its reason; ctest reports it skipped, never passed.
# tests/support/kairos_test_skip.hpp (C++) and plugins/runtime/tests/harness.py (Python) print it.
set(KAIROS_TEST_SKIP_MARKER "KAIROS-TEST-SKIPPED:")

# doctest_discover_tests, plus: the skip marker, and a build error when a registered name would
# select no test case (a ';' splits a name into two filters that match nothing, and doctest exits
# 0 after running "0 test cases").
function(kairos_discover_tests target)
  cmake_parse_arguments(arg "" "TEST_PREFIX;WORKING_DIRECTORY" "PROPERTIES" ${ARGN})
  set(working_directory)
  if(arg_WORKING_DIRECTORY)
    set(working_directory WORKING_DIRECTORY ${arg_WORKING_DIRECTORY})
  endif()
  doctest_discover_tests(${target} TEST_PREFIX "${arg_TEST_PREFIX}" ${working_directory}
    PROPERTIES SKIP_REGULAR_EXPRESSION "${KAIROS_TEST_SKIP_MARKER}" ${arg_PROPERTIES})
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXECUTABLE=$<TARGET_FILE:${target}>
            -P ${PROJECT_SOURCE_DIR}/cmake/check_doctest_names.cmake
    VERBATIM)
  target_link_libraries(${target} PRIVATE kairos_test_support)
endfunction()

# A group of tests that configure left out. `why` says what is missing; `install` names the Debian
# package that provides it (scripts/run-tests.sh fails when one of those is missing, since its
# install step should have provided it), or is empty when nothing can (another platform).
function(kairos_tests_not_built group why install)
  if(install)
    set(name "${group}: not built (install ${install})")
  else()
    set(name "${group}: not built on this platform")
  endif()
  add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} -E echo "${KAIROS_TEST_SKIP_MARKER} ${why}")
  set_tests_properties("${name}" PROPERTIES SKIP_REGULAR_EXPRESSION "${KAIROS_TEST_SKIP_MARKER}")
endfunction()

add_library(kairos_test_support INTERFACE)
target_include_directories(kairos_test_support INTERFACE ${PROJECT_SOURCE_DIR}/tests/support)
