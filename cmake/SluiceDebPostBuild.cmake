# CPack post-build script (CPACK_POST_BUILD_SCRIPTS, cmake/SluicePackaging.cmake):
# CPack (up to 3.25 at least) gives a package with a shared library in
# /usr/lib a postinst and a postrm that only run ldconfig, and cannot be
# told not to. The package ships an ldconfig trigger instead (Debian's way,
# lintian: maintscript-calls-ldconfig), so those two scripts are dropped
# here when they are exactly CPack's ldconfig boilerplate; anything else in
# them is left alone.
find_program(_sluice_dpkg_deb dpkg-deb REQUIRED)
foreach(_deb IN LISTS CPACK_PACKAGE_FILES)
  if(NOT _deb MATCHES "\\.deb$")
    continue()
  endif()
  set(_dir ${CPACK_TOPLEVEL_DIRECTORY}/sluice-repack)
  file(REMOVE_RECURSE ${_dir})
  execute_process(COMMAND ${_sluice_dpkg_deb} -R ${_deb} ${_dir}
                  RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "dpkg-deb -R ${_deb} failed")
  endif()
  set(_dropped FALSE)
  foreach(_script postinst postrm)
    set(_f ${_dir}/DEBIAN/${_script})
    if(EXISTS ${_f} AND EXISTS ${_dir}/DEBIAN/triggers)
      file(READ ${_f} _text)
      string(REGEX REPLACE "[ \t\n]+" " " _text "${_text}")
      if(_text MATCHES "^#!/bin/sh set -e if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then ldconfig fi ?$")
        file(REMOVE ${_f})
        set(_dropped TRUE)
      endif()
    endif()
  endforeach()
  if(_dropped)
    execute_process(COMMAND ${_sluice_dpkg_deb} --root-owner-group -Zxz
                            --build ${_dir} ${_deb}
                    OUTPUT_QUIET RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "dpkg-deb --build ${_deb} failed")
    endif()
    message(STATUS "sluice: ${_deb}: ldconfig trigger, no maintainer scripts")
  endif()
  file(REMOVE_RECURSE ${_dir})
endforeach()
