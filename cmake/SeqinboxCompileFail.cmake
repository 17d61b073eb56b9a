# seqinbox_add_compile_fail_test(NAME <name> SOURCE <file.cpp> REGEX <regex> [LABELS <label>...])
# Registers CTest test <name>, which compiles SOURCE with the project's C++ compiler
# (-std=c++20 -fsyntax-only, include dirs of seqinbox::memory, seqinbox::core and range-v3)
# and passes only if the compilation FAILS and the compiler output matches REGEX: a misuse
# must be rejected, and for the documented reason.
#
# The test runs this same file as a script: cmake -DPARAMS=<file> -P SeqinboxCompileFail.cmake
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  # PARAMS (written by seqinbox_add_compile_fail_test) sets COMPILER, SOURCE, REGEX,
  # INCLUDE_DIRS and IMPLICIT_INCLUDE_DIRS.
  cmake_minimum_required(VERSION 3.25)
  include("${PARAMS}")
  set(args -std=c++20 -fsyntax-only -fdiagnostics-color=never)
  list(REMOVE_DUPLICATES INCLUDE_DIRS)
  foreach(dir IN LISTS INCLUDE_DIRS)
    # -I/usr/include would break the compiler's own #include_next chain.
    if(NOT dir IN_LIST IMPLICIT_INCLUDE_DIRS)
      list(APPEND args "-I${dir}")
    endif()
  endforeach()
  set(ENV{LC_ALL} C)  # plain ASCII quotes in diagnostics, so REGEX can match them
  execute_process(COMMAND "${COMPILER}" ${args} "${SOURCE}"
    RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  list(JOIN args " " shown)
  if(result EQUAL 0)
    message(FATAL_ERROR "${SOURCE} compiled, but must not.\n"
      "command: ${COMPILER} ${shown} ${SOURCE}")
  endif()
  if(NOT output MATCHES "${REGEX}")
    message(FATAL_ERROR "${SOURCE} was rejected, but not for the expected reason: the compiler "
      "output does not match\n  ${REGEX}\ncommand: ${COMPILER} ${shown} ${SOURCE}\n"
      "output:\n${output}")
  endif()
  message(STATUS "${SOURCE} is rejected as expected: \"${CMAKE_MATCH_0}\"")
  return()
endif()

include_guard(GLOBAL)

function(seqinbox_add_compile_fail_test)
  cmake_parse_arguments(arg "" "NAME;SOURCE;REGEX" "LABELS" ${ARGN})
  foreach(required IN ITEMS NAME SOURCE REGEX)
    if(NOT arg_${required})
      message(FATAL_ERROR "seqinbox_add_compile_fail_test: ${required} is required")
    endif()
  endforeach()
  cmake_path(ABSOLUTE_PATH arg_SOURCE BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${arg_SOURCE}")
    message(FATAL_ERROR "seqinbox_add_compile_fail_test(${arg_NAME}): no file ${arg_SOURCE}")
  endif()
  # Parameters go through a generated file: the include dirs are a list and REGEX may hold
  # characters that do not survive a command line. INTERFACE_INCLUDE_DIRECTORIES evaluates
  # transitively, so seqinbox_memory's also brings core's and range-v3's.
  set(params "${CMAKE_CURRENT_BINARY_DIR}/compile_fail/${arg_NAME}.cmake")
  set(includes "$<TARGET_PROPERTY:seqinbox_memory,INTERFACE_INCLUDE_DIRECTORIES>")
  file(GENERATE OUTPUT "${params}" CONTENT "\
set(COMPILER [==[${CMAKE_CXX_COMPILER}]==])
set(SOURCE [==[${arg_SOURCE}]==])
set(REGEX [==[${arg_REGEX}]==])
set(INCLUDE_DIRS [==[${includes}]==])
set(IMPLICIT_INCLUDE_DIRS [==[${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}]==])
")
  add_test(NAME ${arg_NAME}
    COMMAND ${CMAKE_COMMAND} -DPARAMS=${params} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
  set_tests_properties(${arg_NAME} PROPERTIES LABELS "compile_fail;${arg_LABELS}" TIMEOUT 120)
endfunction()
