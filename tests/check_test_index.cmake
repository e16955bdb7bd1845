# tests/README.md lists every test file under the behaviour it checks, so that a reader finds the
# tests of a behaviour: this fails when a test file is not listed there, or a listed one is gone.
#   cmake -DSOURCE_DIR=<project root> -P check_test_index.cmake
# A test file: tests/<layer>/test_*.cpp, tests/fuzz/fuzz_*.cpp and gen_corpus.cpp, and the
# check scripts (tests/check_*.cmake, tests/package/check_package.cmake). A listed file is a line
# "- `<path under tests/>`: what it checks".
cmake_policy(SET CMP0057 NEW) # if(... IN_LIST ...)
set(tests_dir "${SOURCE_DIR}/tests")
file(GLOB_RECURSE test_files RELATIVE "${tests_dir}" "${tests_dir}/*/test_*.cpp"
     "${tests_dir}/fuzz/*.cpp" "${tests_dir}/check_*.cmake" "${tests_dir}/package/check_*.cmake")
file(STRINGS "${tests_dir}/README.md" entries REGEX "^- `[^` ]+\\.(cpp|cmake)`: ")
set(listed "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^- `([^`]+)`: .*" "\\1" path "${entry}")
  list(APPEND listed "${path}")
endforeach()
set(problems "")
foreach(file IN LISTS test_files)
  if(NOT file IN_LIST listed)
    string(APPEND problems "  not listed: ${file}\n")
  endif()
endforeach()
foreach(path IN LISTS listed)
  if(NOT EXISTS "${tests_dir}/${path}")
    string(APPEND problems "  listed but not there: ${path}\n")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "tests/README.md and the test files disagree (add a line per file, "
                      "\"- `path`: what it checks\", under its behaviour):\n${problems}")
endif()
