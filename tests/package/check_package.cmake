# Using fcgi-host as a handler author does, without and with installing it (cmake -P):
#   MODE=build-tree  find_package(fcgi_host) from the build tree (fcgi_host_DIR=<build>), and the
#                    one-line g++ command for a plugin with -I<source tree>
#   MODE=install     the same against an install prefix (cmake --install into a DESTDIR under
#                    WORK), -I<prefix>/include/fcgi-host
# Each: the consumer project (tests/package/consumer) configures, builds, and its in-process test
# passes; the plugin built by g++ loads in fcgi-host (--test-config loads it).
# Inputs: SOURCE_DIR BUILD_DIR HOST CXX FLAGS WORK MODE.
cmake_minimum_required(VERSION 3.20)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "${what} failed (${rc}):\n  ${command}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

separate_arguments(flags UNIX_COMMAND "${FLAGS}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

if(MODE STREQUAL "install")
  file(STRINGS "${BUILD_DIR}/CMakeCache.txt" prefix_line REGEX "^CMAKE_INSTALL_PREFIX:")
  string(REGEX REPLACE "^[^=]*=" "" prefix "${prefix_line}")
  run("cmake --install" ${CMAKE_COMMAND} -E env "DESTDIR=${WORK}/root" ${CMAKE_COMMAND} --install
      "${BUILD_DIR}")
  set(root "${WORK}/root${prefix}")
  set(package_args "-DCMAKE_PREFIX_PATH=${root}")
  set(include_dir "${root}/include/fcgi-host")
  set(HOST "${root}/bin/fcgi-host")
else()
  set(package_args "-Dfcgi_host_DIR=${BUILD_DIR}")
  set(include_dir "${SOURCE_DIR}")
endif()

# The CMake way.
run("configure the consumer" ${CMAKE_COMMAND} -S "${CMAKE_CURRENT_LIST_DIR}/consumer"
    -B "${WORK}/consumer" ${package_args} "-DCMAKE_CXX_COMPILER=${CXX}"
    "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}"
    "-DCMAKE_MODULE_LINKER_FLAGS=${FLAGS}" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run("build the consumer" ${CMAKE_COMMAND} --build "${WORK}/consumer")
run("the consumer's in-process test" "${WORK}/consumer/hello_test")
if(NOT output MATCHES "consumer: hello world")
  message(FATAL_ERROR "hello_test said: ${output}")
endif()
run("fcgi-host --app <the consumer's plugin>" "${HOST}" --app
    "${WORK}/consumer/libhello_plugin.so" --listen "unix:${WORK}/a.sock" --test-config)

# The one-line compiler command of docs/plugins.md.
run("g++ one-liner" "${CXX}" -std=c++20 -shared -fPIC ${flags} "-I${include_dir}"
    "${CMAKE_CURRENT_LIST_DIR}/consumer/hello_plugin.cpp" -o "${WORK}/libhello.so")
run("fcgi-host --app <the one-liner's plugin>" "${HOST}" --app "${WORK}/libhello.so" --listen
    "unix:${WORK}/b.sock" --test-config)
if(NOT output MATCHES "is valid")
  message(FATAL_ERROR "--test-config said: ${output}")
endif()
file(REMOVE_RECURSE "${WORK}")
message(STATUS "${MODE}: find_package(fcgi_host) and the g++ one-liner work")
