# Installation: the library, its public headers, the programs, an exported
# CMake package (find_package(asio_rdma 0.2 CONFIG) -> asio_rdma::asio_rdma),
# a pkg-config file (asio-rdma.pc), and CPack .deb packages.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ASIO_RDMA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/asio_rdma)

install(TARGETS asio_rdma EXPORT asio_rdma_targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/asio_rdma
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
  FILES_MATCHING PATTERN "*.hpp")

foreach(program rdma_echo rdma_bench rdma_cp raw_ping)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()

install(EXPORT asio_rdma_targets NAMESPACE asio_rdma:: FILE asio_rdmaTargets.cmake
  DESTINATION ${ASIO_RDMA_CMAKE_DIR} COMPONENT dev)
if(BUILD_SHARED_LIBS)
  set(ASIO_RDMA_STATIC OFF)
else()
  set(ASIO_RDMA_STATIC ON)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/asio_rdmaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/asio_rdmaConfig.cmake INSTALL_DESTINATION ${ASIO_RDMA_CMAKE_DIR})
# 0.2.x is compatible with 0.2.y only: the ABI may change with each minor version before 1.0.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/asio_rdmaConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/asio_rdmaConfig.cmake
              ${PROJECT_BINARY_DIR}/asio_rdmaConfigVersion.cmake
  DESTINATION ${ASIO_RDMA_CMAKE_DIR} COMPONENT dev)

# pkg-config: the public headers include <infiniband/verbs.h> (its cflags come
# with Requires.private); libibverbs, librdmacm, libisal, libcrypto and threads are on the
# link line of the static library only (pkg-config --static). Boost (headers
# only) ships no .pc file on Debian.
# The prefix is written at install time, so that `cmake --install --prefix DIR`
# and the .deb (/usr) both get the right one.
set(ASIO_RDMA_PC_PREFIX "@ASIO_RDMA_PC_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/asio-rdma.pc.in ${PROJECT_BINARY_DIR}/asio-rdma.pc.in @ONLY)
install(CODE "
  set(ASIO_RDMA_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/asio-rdma.pc\")
  message(STATUS \"Installing: \${pc}\")
  configure_file(\"${PROJECT_BINARY_DIR}/asio-rdma.pc.in\" \"\${pc}\" @ONLY)
" COMPONENT dev)

include(${CMAKE_CURRENT_LIST_DIR}/packaging.cmake)
