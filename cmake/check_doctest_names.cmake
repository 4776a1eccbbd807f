# Run after linking a doctest executable (see kairos_discover_tests): every test case name must
# select exactly that one test case when given back to the program as its --test-case filter,
# which is how each ctest entry runs it.
execute_process(COMMAND "${EXECUTABLE}" --list-test-cases OUTPUT_VARIABLE listing
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${EXECUTABLE} --list-test-cases failed (${result}):\n${listing}")
endif()
string(REGEX MATCH "\n[^\n]*;[^\n]*" split_name "${listing}")
if(split_name)
  string(STRIP "${split_name}" split_name)
  message(FATAL_ERROR "test case \"${split_name}\" in ${EXECUTABLE}: a ';' in a test name splits "
                      "it into two ctest filters that match nothing; rephrase it without ';'")
endif()
string(REPLACE "\n" ";" lines "${listing}")
foreach(name IN LISTS lines)
  if(name STREQUAL "" OR name MATCHES "^===" OR name MATCHES "^\\[doctest\\] ")
    continue()
  endif()
  string(REPLACE "," "\\," filter "${name}")  # as doctest_discover_tests escapes it
  execute_process(COMMAND "${EXECUTABLE}" "--test-case=${filter}" --count
                  OUTPUT_VARIABLE counted RESULT_VARIABLE result)
  if(NOT counted MATCHES "passing the current filters: 1\n")
    message(FATAL_ERROR "test case \"${name}\" in ${EXECUTABLE}: its ctest filter does not "
                        "select exactly this one test case (rename it):\n${counted}")
  endif()
endforeach()
