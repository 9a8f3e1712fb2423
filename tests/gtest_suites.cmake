# One CTest test per GoogleTest suite (all of a suite's cases in one process), where
# gtest_discover_tests makes one per case. A process of ours spends about 1 s (0.95 CPU-s on a
# 2-core AMD EPYC VM) loading LibTorch and its CUDA libraries before its first case: per case, that
# was most of the unit label's CPU time. `ctest -R Suite` still selects a suite, and the binary's own
# --gtest_filter one case.
#
# Run after each build of a test binary (tests/CMakeLists.txt, mpirl_gtest_suites):
#   cmake -D EXE=<binary> -D OUT=<file.cmake> -D LABELS=<label> -P gtest_suites.cmake
# OUT is one of the directory's TEST_INCLUDE_FILES, read by ctest.
cmake_minimum_required(VERSION 3.25)
foreach(_v EXE OUT LABELS)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "gtest_suites.cmake: -D ${_v}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                RESULT_VARIABLE _rc TIMEOUT 120)
if(NOT _rc EQUAL 0)
  # A binary that cannot list its tests must fail the build, not register nothing.
  file(REMOVE "${OUT}")
  message(FATAL_ERROR "gtest_suites.cmake: '${EXE} --gtest_list_tests' exited with ${_rc}:\n${_out}\n${_err}")
endif()
string(REPLACE ";" "\\;" _out "${_out}")
string(REPLACE "\n" ";" _lines "${_out}")
set(_registered 0)
set(_suite "")
set(_cases 0)
set(_text "# Written by tests/gtest_suites.cmake from '${EXE} --gtest_list_tests'.\n")
macro(_flush)
  if(NOT _suite STREQUAL "" AND _cases GREATER 0)
    # Parameterised suites list as Prefix/Suite.; the filter takes the name as printed.
    string(APPEND _text "add_test([==[${_suite}]==] [==[${EXE}]==] [==[--gtest_filter=${_suite}.*]==])\n"
           "set_tests_properties([==[${_suite}]==] PROPERTIES LABELS [==[${LABELS}]==])\n")
    math(EXPR _registered "${_registered} + 1")
  endif()
endmacro()
foreach(_line IN LISTS _lines)
  if(_line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    _flush()
    set(_suite "${CMAKE_MATCH_1}")
    set(_cases 0)
  elseif(_line MATCHES "^  ([^ ]+)")
    # DISABLED_ cases are skipped by gtest itself; a suite of nothing else registers no test.
    if(NOT CMAKE_MATCH_1 MATCHES "^DISABLED_" AND NOT _suite MATCHES "^DISABLED_")
      math(EXPR _cases "${_cases} + 1")
    endif()
  endif()
endforeach()
_flush()
if(_registered EQUAL 0)
  message(FATAL_ERROR "gtest_suites.cmake: '${EXE} --gtest_list_tests' listed no suites")
endif()
file(WRITE "${OUT}" "${_text}")
