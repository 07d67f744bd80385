// asio_rdma::connection and asio_rdma::connection_request: thin handles.
#include "cm/endpoint.hpp"
#include "rc/connection_impl.hpp"
#include "rc/credit_flow.hpp"
#include "rc/pending_request.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/connect.hpp>
#include <asio_rdma/connection_request.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/post.hpp>

namespace asio_rdma {

connection::connection() noexcept = default;
connection::connection(std::shared_ptr<detail::connection_impl> impl) noexcept
    : impl_(std::move(impl)), ex_(impl_ ? impl_->get_executor() : executor_type()) {}
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
    ex_ = std::move(other.ex_);
  }
  return *this;
}
connection::~connection() { close(); }

connection::executor_type connection::get_executor() const {
  return impl_ ? impl_->get_executor() : executor_type();
}
bool connection::is_open() const noexcept { return impl_ && impl_->is_open(); }

boost::asio::ip::tcp::endpoint connection::local_endpoint() const {
  auto* id = native_handle();
  return id ? detail::to_endpoint(::rdma_get_local_addr(id)) : boost::asio::ip::tcp::endpoint();
}
boost::asio::ip::tcp::endpoint connection::remote_endpoint() const {
  auto* id = native_handle();
  return id ? detail::to_endpoint(::rdma_get_peer_addr(id)) : boost::asio::ip::tcp::endpoint();
}

std::span<const std::byte> connection::peer_private_data() const noexcept {
  return impl_ ? impl_->peer_private_data() : std::span<const std::byte>();
}

const connection_options& connection::options() const {
  static const connection_options defaults;
  return impl_ ? impl_->options() : defaults;
}

connection_statistics connection::statistics() const noexcept {
  return impl_ ? impl_->statistics() : connection_statistics();
}

void connection::close() noexcept {
  if (impl_)
    impl_->close();
}

rdma_cm_id* connection::native_handle() const noexcept { return impl_ ? impl_->id() : nullptr; }
ibv_qp* connection::native_queue_pair() const noexcept { return impl_ ? impl_->qp() : nullptr; }
ibv_pd* connection::native_protection_domain() const noexcept {
  return impl_ ? impl_->pd() : nullptr;
}

// ---------------------------------------------------------------- connection_request

connection_request::connection_request() noexcept = default;
connection_request::connection_request(detail::pending_request_ptr request,
                                       executor_type ex) noexcept
    : request_(std::move(request)), ex_(std::move(ex)) {}
connection_request::connection_request(connection_request&&) noexcept = default;
connection_request& connection_request::operator=(connection_request&&) noexcept = default;
connection_request::~connection_request() = default;

boost::asio::ip::tcp::endpoint connection_request::remote_endpoint() const {
  return request_ ? detail::to_endpoint(::rdma_get_peer_addr(request_->id.get()))
                  : boost::asio::ip::tcp::endpoint();
}

std::span<const std::byte> connection_request::private_data() const noexcept {
  if (!request_)
    return {};
  auto data = request_->event.data();
  // On iWARP the library's credit offer follows the application's private data
  // (rc/credit_flow.hpp): the application sees its own part only.
  const rdma_cm_id* id = request_->id.get();
  if (id && id->verbs && id->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
    detail::take_offer(data);
  return data;
}

void connection_request::reject(std::span<const std::byte> private_data) {
  error_code ec;
  reject(private_data, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::connection_request::reject");
}

void connection_request::reject(std::span<const std::byte> private_data, error_code& ec) {
  if (!request_) {
    ec = boost::asio::error::not_connected;
    return;
  }
  if (private_data.size() > connection_options::max_reject_private_data) {
    ec = boost::asio::error::invalid_argument;
    return;
  }
  auto request = std::move(request_);
  ec = detail::from_minus_one(::rdma_reject(
      request->id.get(), private_data.data(), static_cast<std::uint8_t>(private_data.size())));
  request->id.reset(); // decided: the destructor must not reject again
}

namespace detail {

void pending_request_deleter::operator()(pending_request* request) const noexcept {
  delete request;
}

void start_accept_request_as_connection(pending_request_ptr request,
                                        const connection_options& options,
                                        connection_operation&& pending) {
  auto impl = std::make_shared<connection_impl>(request->ex, options);
  impl->start_accept(std::move(request->channel), std::move(request->id), request->event,
                     std::move(pending));
}

void start_connect(const boost::asio::any_io_executor& ex, std::string host, std::uint16_t port,
                   const connection_options& options, connection_operation&& pending) {
  auto impl = std::make_shared<connection_impl>(ex, options);
  impl->start_connect(std::move(host), port, std::move(pending));
}

} // namespace detail
} // namespace asio_rdma
