# The raw FastCGI test client (no libfcgi): for these tests, and for handler authors' own tests.
add_library(fcgi_test_client STATIC ${PROJECT_SOURCE_DIR}/fcgi_host/testing/fcgi_test_client.cpp)
set_target_properties(fcgi_test_client PROPERTIES OUTPUT_NAME fcgi-host-test-client)
# One include line in the source tree, the build tree and installed:
# #include "fcgi_host/testing/fcgi_test_client.hpp", beside "app/router.hpp".
target_include_directories(fcgi_test_client PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                   $<INSTALL_INTERFACE:${FCGI_HOST_INCLUDEDIR}>)
target_compile_features(fcgi_test_client PUBLIC cxx_std_20)
# The client speaks the host's own codec; fcgi_protocol has no libfcgi in it.
target_link_libraries(fcgi_test_client PUBLIC fcgi_protocol)
# Public: handler authors test their handlers with the same client, in-process
# (fcgi_host::InProcessHost) or against a running host: find_package(fcgi_host) gives
# fcgi_host::fcgi_test_client.
install(TARGETS fcgi_test_client EXPORT fcgi_host_targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/testing/fcgi_test_client.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host/testing)
