// Helpers for the stream tests: two ends of one asio_rdma::stream, random content.
#pragma once

#include "rdma_test.hpp"

#include <asio_rdma/stream.hpp>

#include <cstddef>
#include <random>
#include <vector>

namespace asio_rdma::test {

struct stream_pair {
  asio_rdma::acceptor acceptor; // stays open with the pair
  asio_rdma::stream server;
  asio_rdma::stream client;
};

/// Two ends of one stream, made of a connected pair. (Options by value: see make_pair.)
inline asio::awaitable<stream_pair> make_streams(connection_options options,
                                                 stream_options server_stream,
                                                 stream_options client_stream) {
  auto p = co_await make_pair(options, options);
  co_return stream_pair{std::move(p.acceptor), stream(std::move(p.server), server_stream),
                        stream(std::move(p.client), client_stream)};
}

inline asio::awaitable<stream_pair> make_streams(connection_options options) {
  co_return co_await make_streams(options, stream_options(), stream_options());
}

inline asio::awaitable<stream_pair> make_streams() {
  co_return co_await make_streams(stream_connection_options());
}

/// `n` bytes from a generator seeded with `seed`.
inline std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v)
    b = static_cast<std::byte>(gen());
  return v;
}

} // namespace asio_rdma::test
