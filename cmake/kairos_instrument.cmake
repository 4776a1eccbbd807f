# kairos_instrument(<target> [EXCLUDE_FUNCTIONS name...] [EXCLUDE_FILES path...])
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
function(kairos_instrument target)
  cmake_parse_arguments(arg "" "" "EXCLUDE_FUNCTIONS;EXCLUDE_FILES" ${ARGN})
  if(NOT TARGET ${target})
    message(FATAL_ERROR "kairos_instrument: '${target}' is not a target")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "kairos_instrument: unknown arguments '${arg_UNPARSED_ARGUMENTS}'; accepted: "
                        "EXCLUDE_FUNCTIONS name..., EXCLUDE_FILES path...")
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
