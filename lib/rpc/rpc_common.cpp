// What the RPC client and server share: the error category, endpoints, option checks.
#include <asio_rdma/rpc/error.hpp>
#include <asio_rdma/rpc/options.hpp>

#include <charconv>
#include <ostream>
#include <string>

namespace asio_rdma::rpc {
namespace {

class rpc_category_impl final : public boost::system::error_category {
public:
  const char* name() const noexcept override { return "asio_rdma.rpc"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
    case errc::unknown_method: return "unknown method";
    case errc::request_too_large: return "request larger than the server accepts";
    case errc::response_too_large: return "response larger than the client accepts";
    case errc::deadline_exceeded: return "deadline exceeded";
    case errc::cancelled: return "call cancelled by the server";
    case errc::server_draining: return "server draining: no new calls";
    case errc::handler_failed: return "the method's handler failed";
    case errc::protocol_error: return "RPC protocol violation by the peer";
    case errc::version_mismatch: return "the peer speaks another RPC protocol version";
    case errc::unavailable: return "service unavailable: reconnecting after a failure";
    case errc::bad_endpoint: return "endpoint is not rdma://host:port or tcp://host:port";
    case errc::decode_failed: return "message could not be decoded as its type";
    }
    return "unknown asio_rdma.rpc error " + std::to_string(value);
  }
};

const char* check_rdma(const connection_options& c, const stream_options& s) {
  if (const char* why = c.problem())
    return why;
  return s.invalid();
}

} // namespace

const boost::system::error_category& rpc_category() noexcept {
  static const rpc_category_impl category;
  return category;
}

std::ostream& operator<<(std::ostream& os, errc e) {
  return os << make_error_code(e).message();
}

std::optional<endpoint> endpoint::parse(std::string_view url) {
  endpoint ep;
  if (url.starts_with("rdma://"))
    ep.transport = transport_kind::rdma, url.remove_prefix(7);
  else if (url.starts_with("tcp://"))
    ep.transport = transport_kind::tcp, url.remove_prefix(6);
  else
    return std::nullopt;
  const auto colon = url.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == url.size())
    return std::nullopt;
  std::string_view host = url.substr(0, colon), port = url.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']')
      return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt; // an IPv6 address needs brackets
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return std::nullopt;
  ep.host = std::string(host);
  ep.port = static_cast<std::uint16_t>(value);
  return ep;
}

const char* client_options::invalid() const noexcept {
  if (default_deadline.count() <= 0)
    return "default_deadline must be positive";
  if (connect_timeout.count() <= 0)
    return "connect_timeout must be positive";
  if (reconnect_backoff.count() < 0 || max_reconnect_backoff < reconnect_backoff)
    return "reconnect_backoff must be 0..max_reconnect_backoff";
  if (max_response_size == 0 || max_response_size > 0xffffffffu)
    return "max_response_size must be 1 B..4 GiB";
  if (retry.max_attempts == 0 || retry.backoff.count() < 0)
    return "retry.max_attempts must be positive and retry.backoff not negative";
  if (reply_buffer_grace.count() <= 0)
    return "reply_buffer_grace must be positive";
  return check_rdma(rdma_connection, rdma_stream);
}

const char* server_options::invalid() const noexcept {
  if (max_request_size == 0 || max_request_size > 0xffffffffu)
    return "max_request_size must be 1 B..4 GiB";
  if (max_calls_per_connection == 0 || max_calls == 0)
    return "max_calls_per_connection and max_calls must be positive";
  return check_rdma(rdma_connection, rdma_stream);
}

} // namespace asio_rdma::rpc
