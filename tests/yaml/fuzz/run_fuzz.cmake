# cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> -DCLANGXX=<clang++> [-DSECONDS=<n>] [-DYAML_CPP_DIR= -DRANGE_V3_DIR=] -P run_fuzz.cmake
# Builds the libFuzzer target with clang, then fuzzes the loader for SECONDS seconds (default:
# 60 when CI=true, else 10) starting from the files of tests/yaml (seeds, never modified).
# Any finding fails the test.
cmake_minimum_required(VERSION 3.25)
if(NOT SECONDS)
  if("$ENV{CI}" STREQUAL "true")
    set(SECONDS 60)
  else()
    set(SECONDS 10)
  endif()
endif()
set(build "${WORK_DIR}/build")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/yaml/fuzz/project" -B "${build}"
    -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEQINBOX_SOURCE_DIR=${SOURCE_DIR}
    -Dyaml-cpp_DIR=${YAML_CPP_DIR} -Drange-v3_DIR=${RANGE_V3_DIR}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the fuzz target failed:\n${out}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build}" -j2 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the fuzz target failed:\n${out}")
endif()

# libFuzzer adds what it finds to the first corpus directory; the seeds stay read-only.
set(corpus "${WORK_DIR}/corpus")
set(seeds "${WORK_DIR}/seeds")
file(REMOVE_RECURSE "${corpus}" "${seeds}")
file(MAKE_DIRECTORY "${corpus}" "${seeds}")
file(GLOB_RECURSE seed_files "${SOURCE_DIR}/tests/yaml/files/*.yaml")
file(COPY ${seed_files} DESTINATION "${seeds}")
execute_process(COMMAND "${build}/fuzz_loader" "${corpus}" "${seeds}" -max_total_time=${SECONDS} -max_len=8192
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "-artifact_prefix=${WORK_DIR}/"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a problem (exit ${rc}); reproducer in ${WORK_DIR}:\n${out}")
endif()
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${out}")
message(STATUS "fuzz_loader ran ${SECONDS}s without findings (${runs})")
