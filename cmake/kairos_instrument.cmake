# kairos_instrument(<target> [EXCLUDE_FUNCTIONS name...] [EXCLUDE_FILES path...])
# kairos_instrument(<target> XRAY [INSTRUCTION_THRESHOLD n])
#
# Compiles <target>'s own sources with -finstrument-functions and links it to kairos::user, whose
# hooks return at once (-fno-plt: each hook is one indirect call, with no PLT jump before it); under kairos-run, libkairos.so's hooks record every call of the target's
# functions as a region (docs/instrumentation.md). Run-time filters: KAIROS_INSTRUMENT_* settings.
#
# With g++, functions from /usr/include (the standard library's templates) are left
# uninstrumented at build time, which costs nothing at run time; EXCLUDE_FILES adds path
# substrings, EXCLUDE_FUNCTIONS substrings of function names (g++'s
# -finstrument-functions-exclude-*-list). clang has no such lists: it instruments after inlining
# (what was inlined costs nothing), and the run-time filters leave the rest out.
#
# XRAY (clang only): XRay sleds in every function of at least INSTRUCTION_THRESHOLD machine
# instructions (default 200, XRay's), a few nops each until kairos patches them at run time, and
# kairos_xray.cpp compiled in to hand XRay's functions to libkairos.so. Filters and time windows
# then patch and unpatch functions during the run, with no rebuild.

# Where kairos_xray.cpp lies: the source tree, or the install tree (set by kairos-config.cmake).
if(NOT KAIROS_XRAY_SOURCE_DIR)
  set(KAIROS_XRAY_SOURCE_DIR ${CMAKE_CURRENT_LIST_DIR}/../plugins/runtime/src/xray)
endif()

function(kairos_instrument target)
  cmake_parse_arguments(arg "XRAY" "INSTRUCTION_THRESHOLD" "EXCLUDE_FUNCTIONS;EXCLUDE_FILES" ${ARGN})
  if(NOT TARGET ${target})
    message(FATAL_ERROR "kairos_instrument: '${target}' is not a target")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kairos_instrument: unknown arguments '${arg_UNPARSED_ARGUMENTS}'; accepted: "
                        "EXCLUDE_FUNCTIONS name..., EXCLUDE_FILES path..., XRAY [INSTRUCTION_THRESHOLD n]")
  endif()
  if(arg_XRAY)
    if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      message(FATAL_ERROR "kairos_instrument(${target} XRAY): XRay needs clang; ${CMAKE_CXX_COMPILER_ID} "
                          "has -finstrument-functions only (kairos_instrument without XRAY)")
    endif()
    if(NOT arg_INSTRUCTION_THRESHOLD)
      set(arg_INSTRUCTION_THRESHOLD 200)
    endif()
    set(flags -fxray-instrument -fxray-instruction-threshold=${arg_INSTRUCTION_THRESHOLD})
    target_compile_options(${target} PRIVATE ${flags})
    target_link_options(${target} PRIVATE -fxray-instrument)
    target_sources(${target} PRIVATE ${KAIROS_XRAY_SOURCE_DIR}/kairos_xray.cpp)
    target_link_libraries(${target} PRIVATE ${CMAKE_DL_LIBS})
    return()
  endif()
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(files /usr/include ${arg_EXCLUDE_FILES})
    list(JOIN files "," file_list)
    set(flags -finstrument-functions -fno-plt "-finstrument-functions-exclude-file-list=${file_list}")
    if(arg_EXCLUDE_FUNCTIONS)
      list(JOIN arg_EXCLUDE_FUNCTIONS "," function_list)
      list(APPEND flags "-finstrument-functions-exclude-function-list=${function_list}")
    endif()
  elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    if(arg_EXCLUDE_FUNCTIONS OR arg_EXCLUDE_FILES)
      message(WARNING "kairos_instrument(${target}): clang has no build-time exclusion lists; use "
                      "KAIROS_INSTRUMENT_EXCLUDE and KAIROS_INSTRUMENT_FILE_EXCLUDE at run time")
    endif()
    set(flags -finstrument-functions-after-inlining -fno-plt)
  else()
    message(FATAL_ERROR "kairos_instrument: ${CMAKE_CXX_COMPILER_ID} is not supported; accepted: GNU, Clang")
  endif()
  target_compile_options(${target} PRIVATE ${flags})
  target_link_libraries(${target} PRIVATE kairos::user)
endfunction()
