#include <asio_rdma/datagram_socket.hpp>

#include "ud/datagram_impl.hpp"

#include <boost/system/system_error.hpp>

namespace asio_rdma {

datagram_socket::datagram_socket(const executor_type& ex, std::string_view address,
                                 std::uint16_t port, const datagram_options& options)
    : ex_(ex) {
  error_code ec;
  *this = datagram_socket(ex, address, port, options, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::datagram_socket");
}

datagram_socket::datagram_socket(const executor_type& ex, std::string_view address,
                                 std::uint16_t port, const datagram_options& options,
                                 error_code& ec)
    : ex_(ex) {
  auto impl = std::make_shared<detail::datagram_impl>(ex);
  ec = impl->open(address, port, options);
  if (ec)
    impl->close();
  else
    impl_ = std::move(impl);
}

datagram_socket::datagram_socket(datagram_socket&& other) noexcept
    : ex_(other.ex_), impl_(std::move(other.impl_)) {}

datagram_socket& datagram_socket::operator=(datagram_socket&& other) noexcept {
  if (this != &other) {
    close();
    ex_ = other.ex_;
    impl_ = std::move(other.impl_);
  }
  return *this;
}

datagram_socket::~datagram_socket() {
  close();
}

void datagram_socket::close() noexcept {
  if (auto impl = std::move(impl_))
    impl->close();
}

std::uint16_t datagram_socket::local_port() const {
  return impl_ ? impl_->local_port() : 0;
}

datagram_endpoint datagram_socket::local_endpoint() const {
  return impl_ ? impl_->local_endpoint() : datagram_endpoint();
}

std::size_t datagram_socket::max_message_size() const {
  return impl_ ? impl_->max_message_size() : 0;
}

void datagram_socket::leave(std::string_view group, error_code& ec) {
  if (!impl_) {
    ec = boost::asio::error::bad_descriptor;
    return;
  }
  ec = impl_->leave(group);
}

void datagram_socket::leave(std::string_view group) {
  error_code ec;
  leave(group, ec);
  if (ec)
    throw boost::system::system_error(ec, "asio_rdma::datagram_socket::leave");
}

ibv_qp* datagram_socket::native_queue_pair() const {
  return impl_ ? impl_->qp() : nullptr;
}
rdma_cm_id* datagram_socket::native_handle() const {
  return impl_ ? impl_->cm_id() : nullptr;
}

namespace detail {

void start_datagram_resolve(datagram_impl* impl, std::string host, std::uint16_t port,
                            endpoint_operation&& pending) {
  impl->resolve(std::move(host), port, std::move(pending));
}

void start_datagram_join(datagram_impl* impl, std::string group, endpoint_operation&& pending) {
  impl->join(std::move(group), std::move(pending));
}

void start_datagram_send(datagram_impl* impl, const buffer_view<boost::asio::const_buffer>& buffers,
                         const datagram_endpoint& peer,
                         pending_operation<void(error_code, std::size_t)>&& pending) {
  impl->send(buffers, peer, std::move(pending));
}

void start_datagram_receive(datagram_impl* impl,
                            const buffer_view<boost::asio::mutable_buffer>& buffers,
                            datagram_receive_operation&& pending) {
  impl->receive(buffers, std::move(pending));
}

} // namespace detail
} // namespace asio_rdma
