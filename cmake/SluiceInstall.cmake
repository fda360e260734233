# Install rules: the libraries, headers, plugin, options.proto, the CMake
# package (sluiceConfig.cmake: sluice::sluice, sluice::sluice_static,
# sluice::protoc-gen-sluice, sluice_generate()) and sluice.pc.
#
#   make install PREFIX=/opt/sluice [DESTDIR=/tmp/stage]
#   cmake --install build --prefix /opt/sluice
include(CMakePackageConfigHelpers)

set(SLUICE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)

install(TARGETS sluice_shared sluice sluice_options_headers
        EXPORT sluiceTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(TARGETS protoc-gen-sluice EXPORT sluiceTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT plugin)

file(GLOB SLUICE_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/sluice/*.h)
install(FILES ${SLUICE_PUBLIC_HEADERS}
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice COMPONENT dev)
# Where protoc -I<prefix>/include finds it, as protobuf installs its
# well-known types.
install(FILES ${PROJECT_SOURCE_DIR}/proto/sluice/options.proto
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice COMPONENT dev)
# protoc-c's headers for options.proto and descriptor.proto, which the
# generated header of a proto importing options.proto includes.
install(FILES ${PROJECT_BINARY_DIR}/proto/gen/sluice/options.pb-c.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice/pb-c/sluice
        COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/proto/gen/google/protobuf/descriptor.pb-c.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice/pb-c/google/protobuf
        COMPONENT dev)

install(EXPORT sluiceTargets NAMESPACE sluice::
        DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/sluiceConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${SLUICE_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# Before 1.0 a new minor version may break the API: only the same minor
# version is compatible; from 1.0 on, the same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(SLUICE_COMPAT SameMinorVersion)
else()
  set(SLUICE_COMPAT SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${SLUICE_COMPAT})
install(FILES ${PROJECT_BINARY_DIR}/sluiceConfig.cmake
              ${PROJECT_BINARY_DIR}/sluiceConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/SluiceGenerate.cmake
        DESTINATION ${SLUICE_CMAKE_DIR} COMPONENT dev)

# pkg-config: written at install time (cmake/SluicePkgConfig.cmake), so
# that the prefix it names is the one installed to (cmake --install
# --prefix P), not the configured one.
install(CODE "
  set(SLUICE_PC_TEMPLATE \"${PROJECT_SOURCE_DIR}/cmake/sluice.pc.in\")
  set(SLUICE_PC_OUT \"${PROJECT_BINARY_DIR}/pc/sluice.pc\")
  set(SLUICE_PC_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
  set(SLUICE_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(SLUICE_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
" COMPONENT dev)
install(SCRIPT ${PROJECT_SOURCE_DIR}/cmake/SluicePkgConfig.cmake
        COMPONENT dev)
install(FILES ${PROJECT_BINARY_DIR}/pc/sluice.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
