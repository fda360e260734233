# Install-time script (cmake/SluiceInstall.cmake): writes sluice.pc for the
# prefix being installed to. Directories below the prefix are written
# relative to ${prefix}, so pkg-config's --define-prefix and relocated trees
# work.
foreach(dir BINDIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${SLUICE_PC_${dir}}")
    set(SLUICE_PC_${dir}_PATH "${SLUICE_PC_${dir}}")
  else()
    set(SLUICE_PC_${dir}_PATH "\${prefix}/${SLUICE_PC_${dir}}")
  endif()
endforeach()
configure_file("${SLUICE_PC_TEMPLATE}" "${SLUICE_PC_OUT}" @ONLY)
