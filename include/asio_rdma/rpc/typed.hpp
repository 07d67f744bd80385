// asio-rdma RPC: typed calls. A codec turns a type into a call's bytes and back; typed
// methods and calls are the byte-level ones with a codec on each side.
//
//   struct sum_request { std::int64_t a, b; };        // trivially copyable: built in
//   rpc::add_typed_method<sum_request, std::int64_t>(
//       server, "sum", [](sum_request r, rpc::call_context&) -> asio::awaitable<std::int64_t> {
//         co_return r.a + r.b;
//       });
//   std::int64_t s = co_await rpc::async_call_as<std::int64_t>(client, "sum", sum_request{1, 2});
//
// Protocol Buffers messages: include <asio_rdma/rpc/protobuf_codec.hpp>.
#pragma once

#include <asio_rdma/rpc/client.hpp>
#include <asio_rdma/rpc/server.hpp>

#include <boost/asio/associator.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/system_error.hpp>

#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace asio_rdma::rpc {

/// How `T` travels as a call's bytes. Specialize it for a type of your own with
///   static void encode(const T& value, std::vector<std::byte>& out);   // appends
///   static bool decode(std::span<const std::byte> in, T& value);       // false: malformed
/// Built in: trivially copyable types (their bytes, as they are in memory: both sides must
/// agree on the layout and byte order), and Protocol Buffers messages
/// (<asio_rdma/rpc/protobuf_codec.hpp>).
template <typename T, typename Enable = void> struct codec;

template <typename T>
struct codec<T, std::enable_if_t<std::is_trivially_copyable_v<T>>> {
  static void encode(const T& value, std::vector<std::byte>& out) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    out.insert(out.end(), p, p + sizeof(T));
  }
  /// Exactly sizeof(T) bytes, or false.
  static bool decode(std::span<const std::byte> in, T& value) {
    if (in.size() != sizeof(T))
      return false;
    std::memcpy(&value, in.data(), sizeof(T));
    return true;
  }
};

/// True when codec<T> is defined (the type can be a typed call's request or response).
template <typename T>
concept encodable = requires(const T& v, T& out, std::vector<std::byte>& bytes,
                             std::span<const std::byte> in) {
  codec<T>::encode(v, bytes);
  { codec<T>::decode(in, out) } -> std::convertible_to<bool>;
};

/// Adds the method `name` whose handler takes a Request and returns a Response:
/// `asio::awaitable<Response>(Request, call_context&)`. A request that does not decode
/// fails the call with errc::decode_failed (the handler does not run). Otherwise as
/// server::add_method.
template <encodable Request, encodable Response, typename Handler>
void add_typed_method(server& s, std::string_view name, Handler handler) {
  s.add_method(name, [handler = std::move(handler)](std::span<const std::byte> bytes,
                                                     call_context& context)
                         -> boost::asio::awaitable<std::vector<std::byte>> {
    Request request{};
    if (!codec<Request>::decode(bytes, request))
      throw boost::system::system_error(make_error_code(errc::decode_failed),
                                        "the request is not a valid message of its type");
    Response response = co_await handler(std::move(request), context);
    std::vector<std::byte> out;
    codec<Response>::encode(response, out);
    co_return out;
  });
}

namespace detail {

/// async_call_as's handler: decodes the reply into a Response for the caller's handler.
/// Holds the encoded request until the call completes. Its executor, allocator and
/// cancellation slot are the caller's handler's (the associator below).
template <typename Response, typename Handler> struct typed_reply {
  Handler handler;
  std::unique_ptr<std::vector<std::byte>> request;
  void operator()(boost::system::error_code ec, std::vector<std::byte> reply) && {
    Response response{};
    if (!ec && !codec<Response>::decode(reply, response))
      ec = make_error_code(errc::decode_failed);
    request.reset();
    std::move(handler)(ec, std::move(response));
  }
};

template <typename Response> struct initiate_typed_call {
  client* c;
  using executor_type = client::executor_type;
  executor_type get_executor() const noexcept { return c->get_executor(); }
  template <typename Handler, typename Request>
  void operator()(Handler&& handler, std::string_view method, const Request& request,
                  const call_options& options) const {
    auto bytes = std::make_unique<std::vector<std::byte>>();
    codec<Request>::encode(request, *bytes);
    const auto buffer = boost::asio::buffer(*bytes);
    c->async_call(method, buffer, options,
                  typed_reply<Response, std::decay_t<Handler>>{std::forward<Handler>(handler),
                                                               std::move(bytes)});
  }
};

} // namespace detail

/// Calls `method` of `c` with `request` encoded by its codec, and decodes the reply as a
/// Response. Completion signature: void(error_code, Response): client::async_call's
/// errors, and errc::decode_failed for a reply that is not a valid Response (or a request
/// the server could not decode). The request is encoded before the call starts: it need
/// not outlive it. Cancellation, deadline: as client::async_call. On an error the server
/// reports, its message is not kept: use client::async_call for it.
template <encodable Response, encodable Request,
          typename CompletionToken = boost::asio::deferred_t>
auto async_call_as(client& c, std::string_view method, const Request& request,
                   const call_options& options, CompletionToken&& token = {}) {
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, Response)>(
      detail::initiate_typed_call<Response>{&c}, token, method, request, options);
}

/// As above with the default deadline.
template <encodable Response, encodable Request,
          typename CompletionToken = boost::asio::deferred_t>
  requires(!std::is_convertible_v<CompletionToken, const call_options&>)
auto async_call_as(client& c, std::string_view method, const Request& request,
                   CompletionToken&& token = {}) {
  return async_call_as<Response>(c, method, request, call_options{},
                                 std::forward<CompletionToken>(token));
}

} // namespace asio_rdma::rpc

/// \cond INTERNAL
// typed_reply keeps the caller's handler's executor, allocator and cancellation slot.
template <template <typename, typename> class Associator, typename Response, typename Handler,
          typename DefaultCandidate>
struct boost::asio::associator<Associator,
                               asio_rdma::rpc::detail::typed_reply<Response, Handler>,
                               DefaultCandidate> : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type
  get(const asio_rdma::rpc::detail::typed_reply<Response, Handler>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler);
  }
  static auto get(const asio_rdma::rpc::detail::typed_reply<Response, Handler>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler, c);
  }
};
/// \endcond
