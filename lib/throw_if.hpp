// The one way lib/ turns a failure into the exception of a throwing overload (the
// error_code overloads report it instead).
#pragma once

#include <asio_rdma/error.hpp>

#include <boost/system/system_error.hpp>

#include <string>

namespace asio_rdma::detail {

/// Throws boost::system::system_error(ec, what) if `ec` is an error.
inline void throw_if(const error_code& ec, const char* what) {
  if (ec)
    throw boost::system::system_error(ec, what);
}

/// As above, for a description built at the call (say, with the argument that failed).
inline void throw_if(const error_code& ec, const std::string& what) {
  if (ec)
    throw boost::system::system_error(ec, what);
}

} // namespace asio_rdma::detail
