# Debian packages with CPack, one per install component
# (cmake/SluiceInstall.cmake):
#
#   libsluice1         runtime  libsluice.so.1*
#   libsluice-dev      dev      headers, libsluice.a, libsluice.so, the CMake
#                               package, sluice.pc, options.proto, pb-c/
#   protoc-gen-sluice  plugin   bin/protoc-gen-sluice
#
# scripts/make-deb.sh (make deb) configures a build for them
# (CMAKE_INSTALL_PREFIX=/usr: the multiarch libdir) and runs cpack there.
#
# The Debian files lintian wants in each package (copyright,
# changelog.Debian.gz, the plugin's man page) are installed EXCLUDE_FROM_ALL:
# CPack installs component by component and gets them; a plain
# `cmake --install` (all components) does not.

# Packages are for sluice's own tree, not for a project that pulls it in.
if(NOT SLUICE_TOP_LEVEL)
  return()
endif()

# Not a real address (.invalid is reserved, RFC 2606); lintian rejects a
# host without a dot ("sluice@invalid").
set(SLUICE_DEB_MAINTAINER "sluice developers <sluice@sluice.invalid>")
set(SLUICE_DEB_RELEASE 1)
set(SLUICE_DEB_VERSION ${PROJECT_VERSION}-${SLUICE_DEB_RELEASE})
set(SLUICE_DEB_RUNTIME libsluice${SLUICE_ABI_VERSION})
set(SLUICE_DEB_DEV libsluice-dev)
set(SLUICE_DEB_PLUGIN protoc-gen-sluice)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME sluice)
set(CPACK_PACKAGE_VENDOR "sluice developers")
set(CPACK_PACKAGE_CONTACT "${SLUICE_DEB_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# Each package's synopsis is the first line of its component description
# below; a non-empty summary would be put in front of all three.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# Installed with DESTDIR=<staging dir> and the real prefix, so that what is
# written at install time (sluice.pc) names /usr, not the staging dir.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR})
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_BINARY_DIR})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev plugin)
set(CPACK_COMPONENTS_GROUPING IGNORE)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${SLUICE_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${SLUICE_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)

# libsluice1: Depends from dpkg-shlibdeps (libc6, libnghttp2-14, libuv1,
# libjansson4, libprotobuf-c1, libssl3, zlib1g); a shlibs file for the packages built
# against it (a release may add symbols, so a binary needs at least the
# version it was built with); the ldconfig trigger, in place of the
# postinst/postrm running ldconfig that CPack writes and
# SluiceDebPostBuild.cmake removes.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${SLUICE_DEB_RUNTIME})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
file(WRITE ${PROJECT_BINARY_DIR}/deb/runtime/triggers
     "activate-noawait ldconfig\n")
# The symbols file (packaging/deb/libsluice1.symbols: each exported
# function with the version that added it) gives dependents exact minimum
# versions; tests/abi checks it against the library's exports.
configure_file(${PROJECT_SOURCE_DIR}/packaging/deb/libsluice1.symbols
               ${PROJECT_BINARY_DIR}/deb/runtime/symbols COPYONLY)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/deb/runtime/triggers
    ${PROJECT_BINARY_DIR}/deb/runtime/symbols)
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/SluiceDebPostBuild.cmake)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
"gRPC-compatible RPC framework in C (shared library)
sluice is an RPC framework in C that speaks gRPC over HTTP/2 (nghttp2,
libuv, OpenSSL) with protobuf-c messages, so its clients and servers work
with any gRPC peer. Calls carry their deadline and size to the load
balancer, which limits each destination with back-pressure.

This package contains the shared library.")

# libsluice-dev: what compiling, linking (shared and static) and
# generating code need. The CMake package's targets name the plugin, so
# find_package(sluice) needs it installed.
set(CPACK_DEBIAN_DEV_PACKAGE_NAME ${SLUICE_DEB_DEV})
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS OFF)
string(JOIN ", " CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "${SLUICE_DEB_RUNTIME} (= ${SLUICE_DEB_VERSION})"
  "${SLUICE_DEB_PLUGIN} (= ${SLUICE_DEB_VERSION})"
  libprotobuf-c-dev libnghttp2-dev libuv1-dev libjansson-dev libssl-dev
  zlib1g-dev pkg-config protobuf-c-compiler protobuf-compiler libprotobuf-dev)
set(CPACK_COMPONENT_DEV_DESCRIPTION
"gRPC-compatible RPC framework in C (development files)
sluice is an RPC framework in C that speaks gRPC over HTTP/2 (nghttp2,
libuv, OpenSSL) with protobuf-c messages, so its clients and servers work
with any gRPC peer.

This package contains the headers, the static library, the CMake package
(find_package(sluice CONFIG), sluice_generate()), the pkg-config file
and sluice/options.proto.")

# protoc-gen-sluice: shlibdeps (libc6, libprotobuf-c1) and protoc, which
# runs it.
set(CPACK_DEBIAN_PLUGIN_PACKAGE_NAME ${SLUICE_DEB_PLUGIN})
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PLUGIN_PACKAGE_DEPENDS protobuf-compiler)
set(CPACK_COMPONENT_PLUGIN_DESCRIPTION
"protoc plugin generating sluice RPC stubs in C
protoc-gen-sluice is the protoc plugin of sluice, a gRPC-compatible RPC
framework in C. Run next to protobuf-c's plugin, it writes typed client
stubs (blocking and asynchronous) and server registration functions for
the services of a .proto file.")

# The Debian doc files, per package.
set(_sluice_deb_src ${PROJECT_SOURCE_DIR}/packaging/deb)
set(_sluice_deb_out ${PROJECT_BINARY_DIR}/deb)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${_sluice_deb_src}/copyright
             ${_sluice_deb_src}/protoc-gen-sluice.1)
find_program(SLUICE_GZIP gzip REQUIRED)
# gzip -9n: no name or time stamp in the header (reproducible).
function(_sluice_gzip in out)
  execute_process(COMMAND ${SLUICE_GZIP} -9nc ${in} OUTPUT_FILE ${out}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${in}: ${rc}")
  endif()
endfunction()

# One changelog entry for the version; dated SOURCE_DATE_EPOCH when set
# (make-deb.sh sets it to the commit's time), else now.
string(TIMESTAMP _sluice_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(MAKE_DIRECTORY ${_sluice_deb_out})
file(WRITE ${_sluice_deb_out}/changelog.Debian
"sluice (${SLUICE_DEB_VERSION}) unstable; urgency=medium

  * sluice ${PROJECT_VERSION}, packaged with CPack.

 -- ${SLUICE_DEB_MAINTAINER}  ${_sluice_deb_date}
")
_sluice_gzip(${_sluice_deb_out}/changelog.Debian
             ${_sluice_deb_out}/changelog.Debian.gz)
file(READ ${_sluice_deb_src}/protoc-gen-sluice.1 _sluice_man)
string(REPLACE "@VERSION@" "${PROJECT_VERSION}" _sluice_man "${_sluice_man}")
file(WRITE ${_sluice_deb_out}/protoc-gen-sluice.1 "${_sluice_man}")
_sluice_gzip(${_sluice_deb_out}/protoc-gen-sluice.1
             ${_sluice_deb_out}/protoc-gen-sluice.1.gz)

foreach(_comp runtime dev plugin)
  string(TOUPPER ${_comp} _COMP)
  install(FILES ${_sluice_deb_src}/copyright
                ${_sluice_deb_out}/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${_COMP}_PACKAGE_NAME}
          COMPONENT ${_comp} EXCLUDE_FROM_ALL)
endforeach()
install(FILES ${_sluice_deb_out}/protoc-gen-sluice.1.gz
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT plugin EXCLUDE_FROM_ALL)

include(CPack)
