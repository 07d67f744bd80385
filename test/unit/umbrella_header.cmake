# What the README says of the umbrella header: asio_rdma.hpp includes every
# public header, the raw socket's (raw_socket.hpp, flow_rule.hpp) too: they
# only declare, so they compile whether or not the library has the socket.
# Usage: cmake -DINCLUDE_DIR=<project>/include -P umbrella_header.cmake
cmake_minimum_required(VERSION 3.25)
file(GLOB headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/asio_rdma/*.hpp)
file(READ ${INCLUDE_DIR}/asio_rdma/asio_rdma.hpp umbrella)
set(problems)
foreach(header ${headers})
  if(header STREQUAL "asio_rdma/asio_rdma.hpp")
    continue()
  endif()
  string(FIND "${umbrella}" "#include <${header}>" at)
  if(at EQUAL -1)
    list(APPEND problems "does not include ${header}")
  endif()
endforeach()
if(problems)
  message(FATAL_ERROR "asio_rdma.hpp: ${problems}")
endif()
list(LENGTH headers count)
message(STATUS "asio_rdma.hpp: checked against ${count} public headers")
