// asio-rdma RPC (docs/rpc.md): co_await services over RDMA or TCP.
//
//   asio_rdma::rpc::server s(ex);
//   s.add_method("echo", [](std::span<const std::byte> req, asio_rdma::rpc::call_context&)
//                            -> asio::awaitable<std::vector<std::byte>> {
//     co_return std::vector<std::byte>(req.begin(), req.end());
//   });
//   s.listen("rdma://0.0.0.0:7000");
//
//   asio_rdma::rpc::client c(ex, "rdma://192.0.2.1:7000");
//   auto reply = co_await c.async_call("echo", asio::buffer(request));
//
// Typed calls: <asio_rdma/rpc/typed.hpp> (included); Protocol Buffers messages:
// <asio_rdma/rpc/protobuf_codec.hpp> (not included here: it needs libprotobuf).
#pragma once

#include <asio_rdma/rpc/client.hpp>
#include <asio_rdma/rpc/error.hpp>
#include <asio_rdma/rpc/method_id.hpp>
#include <asio_rdma/rpc/options.hpp>
#include <asio_rdma/rpc/server.hpp>
#include <asio_rdma/rpc/typed.hpp>
