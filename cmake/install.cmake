# Everything `cmake --install` lays out besides the programs and the client library (their install()
# lines sit beside their targets): the CMake package and pkg-config file of the client library, the shipped
# configuration, the systemd units, the man pages, the examples and the LICENSE.
#
# Destinations follow GNUInstallDirs and stay relative to the prefix (CMAKE_INSTALL_SYSCONFDIR is "etc"
# under /usr/local; Debian's dh_auto_configure passes /etc), so `cmake --install --prefix DIR` puts the whole
# tree under DIR. The units' directory is not a GNUInstallDirs one: systemd reads /usr/local/lib/systemd/system
# as well as /lib/systemd/system, which is where Debian 12 packages put units (debian/rules sets it).
include(CMakePackageConfigHelpers)

set(RDMAGATE_SYSTEMD_UNITDIR "lib/systemd/system" CACHE STRING "where the systemd units are installed")
set(RDMAGATE_SYSUSERSDIR "lib/sysusers.d" CACHE STRING "where the sysusers.d snippet is installed")
set(RDMAGATE_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/rdmagate")
foreach(_dir SYSTEMD_UNITDIR SYSUSERSDIR)
  if(IS_ABSOLUTE "${RDMAGATE_${_dir}}")
    set(RDMAGATE_FULL_${_dir} "${RDMAGATE_${_dir}}")
  else()
    set(RDMAGATE_FULL_${_dir} "${CMAKE_INSTALL_PREFIX}/${RDMAGATE_${_dir}}")
  endif()
endforeach()

if(TARGET rdmagate_client)
  install(EXPORT rdmagateTargets NAMESPACE rdmagate:: FILE rdmagateTargets.cmake
          DESTINATION ${RDMAGATE_CMAKEDIR})
  configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rdmagateConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/rdmagateConfig.cmake INSTALL_DESTINATION ${RDMAGATE_CMAKEDIR})
  # Before 1.0 a minor release may change the API (the ABI is the soname's business): 0.1 accepts 0.1.x.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/rdmagateConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/rdmagateConfig.cmake ${PROJECT_BINARY_DIR}/rdmagateConfigVersion.cmake
          DESTINATION ${RDMAGATE_CMAKEDIR})

  # The .pc file finds its prefix from where it lies (${pcfiledir}), so an installed tree can be moved
  # (cmake --install --prefix, dpkg -x) and still compile its consumers.
  set(_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
  if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
    message(FATAL_ERROR "CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR must be relative to the prefix "
                        "(rdmagate-client.pc derives its prefix from its own location)")
  endif()
  file(RELATIVE_PATH RDMAGATE_PC_TO_PREFIX "/prefix/${_pc_dir}" "/prefix")
  configure_file(${CMAKE_CURRENT_LIST_DIR}/rdmagate-client.pc.in ${PROJECT_BINARY_DIR}/rdmagate-client.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/rdmagate-client.pc DESTINATION ${_pc_dir})
endif()

# The shipped configuration, annotated, at the path the daemon reads by default.
install(FILES conf/rdmagate.yaml DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/rdmagate)

# systemd: the unit names the daemon and its configuration where this install puts them (deploy/ writes the
# Debian paths for a hand install).
if(TARGET rdmagate)
  file(READ deploy/systemd/rdmagate.service _unit)
  foreach(_pair "/usr/bin/rdmagate|${CMAKE_INSTALL_FULL_SBINDIR}/rdmagate"
                "/usr/sbin/rdmagate|${CMAKE_INSTALL_FULL_SBINDIR}/rdmagate"
                "/etc/rdmagate/rdmagate.yaml|${CMAKE_INSTALL_FULL_SYSCONFDIR}/rdmagate/rdmagate.yaml")
    string(REPLACE "|" ";" _pair "${_pair}")
    list(GET _pair 0 _from)
    list(GET _pair 1 _to)
    string(REPLACE "ExecStart=${_from} " "ExecStart=${_to} " _unit "${_unit}")
    string(REPLACE " --config ${_from}" " --config ${_to}" _unit "${_unit}")
  endforeach()
  if(NOT _unit MATCHES "ExecStart=${CMAKE_INSTALL_FULL_SBINDIR}/rdmagate --config ${CMAKE_INSTALL_FULL_SYSCONFDIR}/")
    message(FATAL_ERROR "deploy/systemd/rdmagate.service: its ExecStart= no longer has the form "
                        "'ExecStart=/usr/bin/rdmagate --config /etc/rdmagate/rdmagate.yaml'; update cmake/install.cmake")
  endif()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/systemd/rdmagate.service CONTENT "${_unit}" @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/systemd/rdmagate.service deploy/systemd/rdmagate-hugepages.service
          DESTINATION ${RDMAGATE_SYSTEMD_UNITDIR})
  install(FILES deploy/systemd/rdmagate.sysusers.conf DESTINATION ${RDMAGATE_SYSUSERSDIR} RENAME rdmagate.conf)
endif()

install(FILES docs/man/rdmagate.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES docs/man/rdmagate.yaml.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5)
install(FILES docs/man/rdmagate-bench.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

# Examples: the configuration shapes, the hugepage sysctl snippet (not applied by installing it: reserving
# memory is the administrator's choice), and the client programs with their standalone CMakeLists.txt.
install(DIRECTORY conf/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/conf)
install(FILES deploy/systemd/80-rdmagate-hugepages.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/systemd)
if(EXISTS ${PROJECT_SOURCE_DIR}/examples)
  install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/client)
endif()
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
