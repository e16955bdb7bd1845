# CTest takes each doctest case name as a CMake list element, so a name holding a semicolon is
# registered as two names that match no case: that test "passes" without running anything. This
# script fails instead, naming the case.
#   cmake -DBINARIES=<test binary>|<test binary>... -P check_test_names.cmake
string(REPLACE "|" ";" binaries "${BINARIES}")
foreach(binary IN LISTS binaries)
  execute_process(COMMAND "${binary}" --list-test-cases --no-version=true
                  OUTPUT_VARIABLE names RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${binary} --list-test-cases failed (${status})")
  endif()
  string(FIND "${names}" ";" at)
  if(at GREATER -1)
    string(SUBSTRING "${names}" ${at} 120 around)
    message(FATAL_ERROR "${binary}: a test case name holds a semicolon, which CTest cannot run "
                        "(use a comma): ...${around}")
  endif()
endforeach()
