// Typed calls (include/asio_rdma/rpc/typed.hpp): trivially copyable types and Protocol
// Buffers messages, over TCP on the host.
#define BOOST_TEST_MODULE rpc_typed
#include "rpc_test_support.hpp"

#include "rpc_kv.pb.h"

#include <asio_rdma/rpc/protobuf_codec.hpp>

#include <map>

using namespace asio_rdma::test;
using boost::system::error_code;

namespace {
struct sum_request {
  std::int64_t a, b;
};
struct fixture {
  asio::io_context io;
};
} // namespace

BOOST_FIXTURE_TEST_SUITE(rpc_typed_calls, fixture)

BOOST_AUTO_TEST_CASE(trivially_copyable_requests_and_responses) {
  run(io, [&]() -> asio::awaitable<void> {
    rpc::server s(io.get_executor());
    rpc::add_typed_method<sum_request, std::int64_t>(
        s, "sum", [](sum_request r, rpc::call_context&) -> asio::awaitable<std::int64_t> {
          co_return r.a + r.b;
        });
    s.add_method("echo", echo);
    rpc::client c(io.get_executor(), listen_here(s));
    const auto sum = co_await rpc::async_call_as<std::int64_t>(c, "sum", sum_request{40, 2},
                                                               asio::use_awaitable);
    BOOST_TEST(sum == 42);
    // A reply that is not a Response, a request that is not a Request.
    auto t = asio::as_tuple(asio::use_awaitable);
    auto [e1, v1] = co_await rpc::async_call_as<std::int64_t>(c, "echo", std::int32_t(7), t);
    BOOST_TEST(e1 == rpc::errc::decode_failed);
    auto [e2, v2] = co_await rpc::async_call_as<std::int64_t>(c, "sum", std::int32_t(7), t);
    BOOST_TEST(e2 == rpc::errc::decode_failed);
    // Deferred, then awaited: the request is encoded when the call starts.
    auto op = rpc::async_call_as<std::int64_t>(c, "sum", sum_request{1, 1});
    BOOST_TEST((co_await std::move(op)(asio::use_awaitable)) == 2);
  });
}

BOOST_AUTO_TEST_CASE(protocol_buffers_messages) {
  run(io, [&]() -> asio::awaitable<void> {
    rpc::server s(io.get_executor());
    std::map<std::string, std::string> store;
    rpc::add_typed_method<asio_rdma_kv::put_request, asio_rdma_kv::put_reply>(
        s, "kv.put",
        [&](asio_rdma_kv::put_request r,
            rpc::call_context&) -> asio::awaitable<asio_rdma_kv::put_reply> {
          asio_rdma_kv::put_reply reply;
          reply.set_replaced(store.contains(r.key()));
          store[r.key()] = r.value();
          co_return reply;
        });
    rpc::add_typed_method<asio_rdma_kv::get_request, asio_rdma_kv::get_reply>(
        s, "kv.get",
        [&](asio_rdma_kv::get_request r,
            rpc::call_context&) -> asio::awaitable<asio_rdma_kv::get_reply> {
          asio_rdma_kv::get_reply reply;
          if (auto it = store.find(r.key()); it != store.end()) {
            reply.set_found(true);
            reply.set_value(it->second);
          }
          co_return reply;
        });
    rpc::client c(io.get_executor(), listen_here(s));
    asio_rdma_kv::put_request put;
    put.set_key("k");
    put.set_value(std::string(100000, 'v'));
    auto first = co_await rpc::async_call_as<asio_rdma_kv::put_reply>(c, "kv.put", put,
                                                                      asio::use_awaitable);
    BOOST_TEST(!first.replaced());
    auto again = co_await rpc::async_call_as<asio_rdma_kv::put_reply>(c, "kv.put", put,
                                                                      asio::use_awaitable);
    BOOST_TEST(again.replaced());
    asio_rdma_kv::get_request get;
    get.set_key("k");
    auto got = co_await rpc::async_call_as<asio_rdma_kv::get_reply>(c, "kv.get", get,
                                                                    asio::use_awaitable);
    BOOST_TEST(got.found());
    BOOST_TEST(got.value() == std::string(100000, 'v'));
    get.set_key("missing");
    auto none = co_await rpc::async_call_as<asio_rdma_kv::get_reply>(c, "kv.get", get,
                                                                     asio::use_awaitable);
    BOOST_TEST(!none.found());
    // Bytes that are no put_request.
    const auto junk = bytes_of("\xff\xff\xff");
    auto [ec, message] = co_await c.async_call("kv.put", asio::buffer(junk),
                                               asio::as_tuple(asio::use_awaitable));
    BOOST_TEST(ec == rpc::errc::decode_failed);
  });
}

BOOST_AUTO_TEST_SUITE_END()
