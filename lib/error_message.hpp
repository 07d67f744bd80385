// Errors that say what exactly failed: "send queue depth 4096 exceeds siw0's maximum 1024
// (max_qp_wr)" instead of only "the options ask for more than the device allows". Used on
// failure paths only (setting a connection up, refusing an operation), never per operation.
#pragma once

#include <asio_rdma/error.hpp>

#include <string>

namespace asio_rdma::detail {

/// rdma_category()'s Boost.System id: categories with the same id compare equal, which
/// lets with_message() make codes equal to the plain ones. (A random 64-bit number.)
inline constexpr unsigned long long rdma_category_id = 0x9d3c6a1e52f4b807ULL;

/// An error_code equal to `code` (`ec == code` holds: same value, and a category equal to
/// rdma_category()) whose message() is `message`. The message is kept for the life of the
/// process, so each distinct one is made once; beyond a few hundred distinct messages
/// (which no real program reaches: they name devices and limits) the plain code is
/// returned.
error_code with_message(errc code, std::string message);

} // namespace asio_rdma::detail
