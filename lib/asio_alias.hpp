// `asio::` for the library's own sources: an alias inside namespace asio_rdma
// that only lib/ sees (public headers spell out boost::asio, so that no alias
// reaches users' code through them).
#pragma once

namespace boost::asio {}

namespace asio_rdma {
namespace asio = boost::asio;
} // namespace asio_rdma
