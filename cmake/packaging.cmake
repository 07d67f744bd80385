# CPack: two Debian packages, made with `cpack -G DEB` in a build configured
# with -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr:
#   asio-rdma      the shared library and the programs
#   asio-rdma-dev  headers, the CMake package, asio-rdma.pc, the .so link
set(CPACK_PACKAGE_NAME asio-rdma)
set(CPACK_PACKAGE_VENDOR "asio-rdma")
set(CPACK_PACKAGE_CONTACT "asio-rdma developers <asio-rdma@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "C++20 asynchronous RDMA (rdma-core) on Boost.Asio, with coroutines")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Without debug information: the library alone is 20 MiB with it.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME asio-rdma)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
# libc6, libstdc++6, libibverbs1, librdmacm1 with versions, from dpkg-shlibdeps;
# the providers make a device usable at all.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "ibverbs-providers")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME asio-rdma-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The headers need Boost.Asio >= 1.81 and the verbs headers; the CMake package
# finds libibverbs and librdmacm through pkg-config.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "asio-rdma (= ${PROJECT_VERSION}), libboost1.81-dev | libboost-dev (>= 1.81), libibverbs-dev, librdmacm-dev, pkg-config | pkgconf")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
    "asio-rdma shared library and programs (rdma_echo, rdma_bench, rdma_cp, raw_ping)")
set(CPACK_COMPONENT_DEV_DESCRIPTION "asio-rdma headers, CMake package and pkg-config file")
include(CPack)
