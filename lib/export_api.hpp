// Included before anything else in every source of the library (see
// lib/CMakeLists.txt), which is compiled with -fvisibility=hidden.
//
// Every declaration the public headers make gets default visibility here,
// because this is where they are first seen; the library's private headers,
// read later, stay hidden. So the shared library exports the API and nothing
// else of its own.
//
// Boost is read inside the same region on purpose: Asio keeps per-thread
// state (the call stack that finds the running io_context and its handler
// memory recycler) and its error categories in template statics and
// function-local statics. Hidden, the library would get copies of its own,
// apart from the program's: `ec == asio::error::eof` would fail across the
// library boundary and handler memory would no longer be recycled.
#pragma once

#pragma GCC visibility push(default)
#include <boost/asio.hpp>
#include <boost/endian/conversion.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <asio_rdma/asio_rdma.hpp>
#pragma GCC visibility pop

#include "asio_alias.hpp"
