# Installs the kairos already built in BUILD_DIR into a scratch prefix (what `cmake --install`
# copies is what a user gets; building it a second time, one job, took 12 of CI's 28 minutes),
# then configures and builds tests/install/consumer against it twice: once with
# find_package(kairos CONFIG), once with pkg-config.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
# Nothing of the build tree's tests, examples or benchmarks is installed.
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
foreach(path IN LISTS installed)
  if(path MATCHES "(^|/)(tests?|examples|benchmarks?)/|_test|bench_")
    message(FATAL_ERROR "the install copies a build-tree file: ${path}")
  endif()
endforeach()

set(consumer ${WORK_DIR}/consumer-build)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${consumer} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${consumer} --parallel 1)
run(${consumer}/consumer)
if(EXISTS ${consumer}/consumer_database)
  run(${consumer}/consumer_database)
endif()

# pkg-config: compile the same program with the flags the installed kairos.pc gives.
set(ENV{PKG_CONFIG_PATH} ${prefix}/share/pkgconfig)
execute_process(COMMAND pkg-config --cflags --libs kairos OUTPUT_VARIABLE flags RESULT_VARIABLE status
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "pkg-config does not find the installed kairos.pc")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${CXX} ${SOURCE_DIR}/tests/install/consumer/consumer.cpp ${flags} -o ${WORK_DIR}/consumer-pkg-config)
run(${WORK_DIR}/consumer-pkg-config)
