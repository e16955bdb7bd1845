# Install rules, the CMake package config (find_package(fcgi_host)) and the Debian package (CPack).
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DFCGI_HOST_TESTS=OFF \
#         -DFCGI_HOST_EXAMPLES=OFF -DFCGI_HOST_BENCH=OFF -DFCGI_HOST_DEB=ON
#   cmake --build build -j2 && (cd build && cpack -G DEB)
#
# The package creates the system user and group fcgi-host (the workers' `user`/`group` in the
# shipped config), enables and starts fcgi-host.service, and on purge removes the user, the
# config and the logs. Its binary is stripped; the debug symbols stay in build/fcgi-host.debug.
#
# What a user of the package gets:
#   fcgi_host::app       the handler API headers only: enough for a plugin (--app libx.so), whose
#                        app:: symbols resolve against the fcgi-host executable that loads it.
#   fcgi_host::fcgi_host the static libraries (fcgi_host on fcgi_serving, fcgi_codec,
#                        fcgi_protocol, app, process_manager) with libfcgi, libseccomp,
#                        Boost.Program_options, dl and threads: link it for a program with its own
#                        main that calls fcgi_host::run(argc, argv, handler).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(FCGI_HOST_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/fcgi-host)
set(FCGI_HOST_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/fcgi_host)
set(FCGI_HOST_DOCDIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/fcgi-host)
# A Debian package installs to /usr, its config to /etc and its units to /lib/systemd/system;
# another prefix (a developer's /usr/local or a staging dir) keeps everything under the prefix.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(FCGI_HOST_SYSTEMD_UNITDIR /lib/systemd/system)
else()
  set(FCGI_HOST_SYSTEMD_UNITDIR ${CMAKE_INSTALL_LIBDIR}/systemd/system)
endif()

# Headers-only target for plugins, exported as fcgi_host::app.
add_library(fcgi_host_app_headers INTERFACE)
target_include_directories(fcgi_host_app_headers INTERFACE
                           $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                           $<INSTALL_INTERFACE:${FCGI_HOST_INCLUDEDIR}>)
target_compile_features(fcgi_host_app_headers INTERFACE cxx_std_20)
set_target_properties(fcgi_host_app_headers PROPERTIES EXPORT_NAME app)
# An own-main program gets the headers (and C++20) through fcgi_host::fcgi_host too.
target_link_libraries(fcgi_host PUBLIC fcgi_host_app_headers)
# The static library behind the API is fcgi_host::app_static (fcgi_host::app is the headers).
set_target_properties(app PROPERTIES EXPORT_NAME app_static)

# Namespaced file names in the multiarch libdir (libfcgi-host-app.a, not libapp.a); the CMake
# target names stay.
set_target_properties(app PROPERTIES OUTPUT_NAME fcgi-host-app)
set_target_properties(process_manager PROPERTIES OUTPUT_NAME fcgi-host-process-manager)
set_target_properties(fcgi_protocol PROPERTIES OUTPUT_NAME fcgi-host-protocol)
set_target_properties(fcgi_codec PROPERTIES OUTPUT_NAME fcgi-host-codec)
set_target_properties(fcgi_serving PROPERTIES OUTPUT_NAME fcgi-host-serving)
set_target_properties(fcgi_host PROPERTIES OUTPUT_NAME fcgi-host-core)

install(TARGETS fcgi-host RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS fcgi_host fcgi_serving fcgi_codec fcgi_protocol app process_manager
                fcgi_host_app_headers
        EXPORT fcgi_host_targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${FCGI_HOST_INCLUDEDIR})
# The public API: what a handler includes. Each includes only these and the standard library,
# except json.hpp, which includes nlohmann/json.hpp (nlohmann-json3-dev, Recommends below).
install(FILES
        ${PROJECT_SOURCE_DIR}/app/handler.hpp
        ${PROJECT_SOURCE_DIR}/app/request.hpp
        ${PROJECT_SOURCE_DIR}/app/body_reader.hpp
        ${PROJECT_SOURCE_DIR}/app/response.hpp
        ${PROJECT_SOURCE_DIR}/app/router.hpp
        ${PROJECT_SOURCE_DIR}/app/plugin.hpp
        ${PROJECT_SOURCE_DIR}/app/plugin_abi.hpp
        ${PROJECT_SOURCE_DIR}/app/plugin_abi_declarations.hpp
        ${PROJECT_SOURCE_DIR}/app/builtin_apps.hpp
        ${PROJECT_SOURCE_DIR}/app/args.hpp
        ${PROJECT_SOURCE_DIR}/app/cookies.hpp
        ${PROJECT_SOURCE_DIR}/app/http_error.hpp
        ${PROJECT_SOURCE_DIR}/app/json.hpp
        ${PROJECT_SOURCE_DIR}/app/multipart.hpp
        ${PROJECT_SOURCE_DIR}/app/spill_buffer.hpp
        ${PROJECT_SOURCE_DIR}/app/testing.hpp
        ${PROJECT_SOURCE_DIR}/app/text.hpp
        ${PROJECT_SOURCE_DIR}/app/url_encoding.hpp
        ${PROJECT_SOURCE_DIR}/app/wire_param.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/app)
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/run.hpp DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host)
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/runners/in_process_host.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host/runners)
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/worker/handler_factory.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host/worker)
# What in_process_host.hpp includes: the limits and the option table their defaults come from
# (the ground room fcgi_host/config/; the wide Config of the command line is not installed).
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/config/limits.hpp
              ${PROJECT_SOURCE_DIR}/fcgi_host/config/option_table.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host/config)
# The record codec the test client speaks (fcgi_host::fcgi_protocol).
install(FILES ${PROJECT_SOURCE_DIR}/fcgi_host/protocol/records.hpp
        DESTINATION ${FCGI_HOST_INCLUDEDIR}/fcgi_host/protocol)

install(EXPORT fcgi_host_targets NAMESPACE fcgi_host:: FILE fcgi_hostTargets.cmake
        DESTINATION ${FCGI_HOST_CMAKEDIR})
# The plugin table's version, for the package's fcgi_host_PLUGIN_ABI_VERSION (the layout part of
# the identity is computed by the compiler from the installed headers, app/plugin_abi.hpp).
file(STRINGS ${PROJECT_SOURCE_DIR}/app/plugin.hpp FCGI_HOST_PLUGIN_ABI_VERSION
     REGEX "^#define FCGI_HOST_PLUGIN_ABI_VERSION ")
string(REGEX REPLACE ".* " "" FCGI_HOST_PLUGIN_ABI_VERSION "${FCGI_HOST_PLUGIN_ABI_VERSION}")
# The fallback library names in the config, for a machine with the runtime libraries only.
set(FCGI_HOST_BOOST_PO_SONAME libboost_program_options.so.${Boost_VERSION})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fcgi_hostConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/fcgi_hostConfig.cmake
                              INSTALL_DESTINATION ${FCGI_HOST_CMAKEDIR})
# 0.x: a minor version may change the API (and the plugin ABI, which the host checks at load).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fcgi_hostConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fcgi_hostConfig.cmake
              ${PROJECT_BINARY_DIR}/fcgi_hostConfigVersion.cmake
        DESTINATION ${FCGI_HOST_CMAKEDIR})

# Configuration, units, front-server recipes, man page.
install(FILES ${PROJECT_SOURCE_DIR}/conf/fcgi-host.conf
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/fcgi-host)
install(FILES ${PROJECT_SOURCE_DIR}/conf/pools.d/www.conf
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/fcgi-host/pools.d)
install(FILES ${PROJECT_SOURCE_DIR}/conf/fcgi-host.service ${PROJECT_SOURCE_DIR}/conf/fcgi-host.socket
        DESTINATION ${FCGI_HOST_SYSTEMD_UNITDIR})
install(FILES ${PROJECT_SOURCE_DIR}/conf/nginx-fcgi-host.conf
              ${PROJECT_SOURCE_DIR}/conf/nginx-upstream-cluster.conf
              ${PROJECT_SOURCE_DIR}/conf/fcgi-host.conf
              ${PROJECT_SOURCE_DIR}/conf/apache-fcgi-host.conf
              ${PROJECT_SOURCE_DIR}/conf/apache-fcgi-host-sethandler.conf
              ${PROJECT_SOURCE_DIR}/conf/lighttpd-fcgi-host.conf
              ${PROJECT_SOURCE_DIR}/conf/Caddyfile.fcgi-host
              ${PROJECT_SOURCE_DIR}/conf/h2o-fcgi-host.conf
              ${PROJECT_SOURCE_DIR}/conf/haproxy-fcgi-host.cfg
        DESTINATION ${FCGI_HOST_DOCDIR}/examples)
# The licence (MIT, LICENSE at the root). Debian policy 12.5 wants it as doc/<package>/copyright in
# the machine-readable format, which cmake/debian/copyright is (the same text, checked by the
# test licence_texts_agree); a file named LICENSE there is lintian's extra-license-file. Another
# prefix gets the LICENSE itself beside it.
install(FILES ${PROJECT_SOURCE_DIR}/docs/deploy.md ${PROJECT_SOURCE_DIR}/docs/front-servers.md
              ${PROJECT_SOURCE_DIR}/cmake/debian/copyright
        DESTINATION ${FCGI_HOST_DOCDIR})
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${FCGI_HOST_DOCDIR})
endif()
# Without systemd (containers, sysvinit): the same service as an init script.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/cmake/debian/fcgi-host.init
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/init.d RENAME fcgi-host)
# Debian policy: the changelog as changelog.gz (a native package), gzip -9n like the man page.
set(FCGI_HOST_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/changelog.gz)
add_custom_command(OUTPUT ${FCGI_HOST_CHANGELOG_GZ}
                   COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/cmake/debian/changelog >
                           ${FCGI_HOST_CHANGELOG_GZ}
                   DEPENDS ${PROJECT_SOURCE_DIR}/cmake/debian/changelog
                   COMMENT "Compressing the changelog")
add_custom_target(fcgi_host_changelog ALL DEPENDS ${FCGI_HOST_CHANGELOG_GZ})
install(FILES ${FCGI_HOST_CHANGELOG_GZ} DESTINATION ${FCGI_HOST_DOCDIR})
# Debian policy: man pages compressed with gzip -9, without a timestamp (-n: reproducible).
set(FCGI_HOST_MAN_GZ ${PROJECT_BINARY_DIR}/fcgi-host.1.gz)
add_custom_command(OUTPUT ${FCGI_HOST_MAN_GZ}
                   COMMAND ${CMAKE_COMMAND} -E copy ${PROJECT_SOURCE_DIR}/docs/fcgi-host.1
                           ${PROJECT_BINARY_DIR}/fcgi-host.1
                   COMMAND gzip -9nf ${PROJECT_BINARY_DIR}/fcgi-host.1
                   DEPENDS ${PROJECT_SOURCE_DIR}/docs/fcgi-host.1
                   COMMENT "Compressing the man page")
add_custom_target(fcgi_host_man ALL DEPENDS ${FCGI_HOST_MAN_GZ})
install(FILES ${FCGI_HOST_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# ---- Debian package ---------------------------------------------------------------------------
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "fcgi-host: CMAKE_INSTALL_PREFIX is not /usr; configure with "
                 "-DCMAKE_INSTALL_PREFIX=/usr to build the .deb (multiarch libdir, /etc, /lib/systemd)")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME fcgi-host)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "fcgi-host")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_CONTACT "fcgi-host maintainers <fcgi-host@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "FastCGI application host: a master preforking C++ handler workers")
# The extended description: lines of at most 80 characters (Debian policy 5.6.13).
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "fcgi-host runs a C++ FastCGI handler behind nginx (fastcgi_pass): a master\n"
    "process preforks workers that accept on one listening socket, supervises and\n"
    "respawns them, reloads by generations on HUP and stops gracefully on TERM.\n"
    "It loads a handler plugin (--app libx.so), serves a built-in app, or\n"
    "supervises any FastCGI program (--exec). The headers, static libraries and\n"
    "CMake package (find_package(fcgi_host)) to build handlers are included.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION httpd)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the ELF (libc6, libstdc++6, libfcgi0ldbl, libboost-program-options1.74.0), or the
# explicit list where dpkg-shlibdeps (dpkg-dev) is missing.
find_program(FCGI_HOST_DPKG_SHLIBDEPS dpkg-shlibdeps)
# adduser: the maintainer scripts create and remove the system user fcgi-host.
if(FCGI_HOST_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
else()
  string(CONCAT CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, libc6, libstdc++6, libgcc-s1, "
                "libfcgi0ldbl, libseccomp2, libboost-program-options${Boost_VERSION}")
endif()
# invoke-rc.d --skip-systemd-native in the maintainer scripts (debhelper's pattern).
set(CPACK_DEBIAN_PACKAGE_PREDEPENDS "init-system-helpers (>= 1.54~)")
# Stripped binaries in the package; the symbols are in the build's fcgi-host.debug.
set(CPACK_STRIP_FILES ON)
# For building handlers: a compiler and CMake. No -dev package is needed to link an own main
# (the config falls back to the runtime libraries), but the -dev packages are preferred.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
    "nginx, cmake, g++, libfcgi-dev, libseccomp-dev, libboost-program-options-dev")
# app/json.hpp, for handlers that speak JSON.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "nlohmann-json3-dev")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/cmake/debian/conffiles
    ${PROJECT_SOURCE_DIR}/cmake/debian/postinst
    ${PROJECT_SOURCE_DIR}/cmake/debian/prerm
    ${PROJECT_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
