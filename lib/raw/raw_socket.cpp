// raw_socket's non-template members: open (backend choice), flows, the initiating functions'
// back halves, and the batches and flow handles that lend its resources.
#include <asio_rdma/raw_socket.hpp>

#include "asio_alias.hpp"
#include "raw/bpf_filter.hpp"
#include "raw/packet_backend.hpp"
#include "raw/raw_socket_core.hpp"
#include "raw/verbs_backend.hpp"
#include "throw_if.hpp"

#include <boost/asio/post.hpp>
#include <boost/system/system_error.hpp>

namespace asio_rdma {

namespace {

bool in_range(std::size_t value, std::size_t low, std::size_t high) {
  return value >= low && value <= high;
}

error_code validate(const raw_socket_options& options) {
  static_assert(64 <= detail::max_bpf_rules, "max_flows limit exceeds what one BPF program holds");
  if (!in_range(options.send_buffers, 1, 65536) ||
      !in_range(options.receive_buffers, 1, 1u << 20) ||
      !in_range(options.max_packet_size, 64, 65536) || !in_range(options.max_flows, 1, 64))
    return errc::invalid_option;
  switch (options.backend) {
  case raw_backend::automatic:
  case raw_backend::verbs:
  case raw_backend::packet:
    return {};
  }
  return errc::invalid_option;
}

} // namespace

// --- raw_socket ---

raw_socket raw_socket::open(const executor_type& ex, std::string_view interface_name,
                            const raw_socket_options& options) {
  error_code ec;
  auto socket = open(ex, interface_name, options, ec);
  if (ec)
    detail::throw_if(ec, "raw_socket::open(" + std::string(interface_name) + ")");
  return socket;
}

raw_socket raw_socket::open(const executor_type& ex, std::string_view interface_name,
                            const raw_socket_options& options, error_code& ec) {
  try {
    if ((ec = validate(options)))
      return raw_socket();
    auto interface = detail::lookup_interface(interface_name, ec);
    if (ec)
      return raw_socket();
    auto groups = std::make_unique<detail::multicast_groups>(interface.index, ec);
    if (ec)
      return raw_socket();
    // automatic is packet: the verbs data path has never run on a NIC with raw packet
    // queue pairs (docs/raw_socket.md), so only a user who names it gets it.
    std::unique_ptr<detail::backend> backend;
    if (options.backend == raw_backend::verbs)
      backend = detail::open_verbs_backend(interface, options, ec);
    else
      backend = detail::packet_backend::open(interface, options, ec);
    if (!backend)
      return raw_socket();
    auto core = std::make_shared<detail::raw_socket_core>(ex, std::move(interface),
                                                          std::move(backend), std::move(groups));
    if ((ec = core->register_descriptors()))
      return raw_socket();
    return raw_socket(ex, std::move(core));
  } catch (const std::bad_alloc&) {
    ec = error_code(ENOMEM, boost::system::system_category());
    return raw_socket();
  }
}

raw_socket::raw_socket() noexcept = default;

raw_socket::raw_socket(executor_type ex, std::shared_ptr<detail::raw_socket_core> core) noexcept
    : ex_(std::move(ex)), impl_(std::move(core)) {}

raw_socket::raw_socket(raw_socket&& other) noexcept
    : ex_(other.ex_), impl_(std::move(other.impl_)) {}

raw_socket& raw_socket::operator=(raw_socket&& other) noexcept {
  if (this != &other) {
    close();
    ex_ = other.ex_;
    impl_ = std::move(other.impl_);
  }
  return *this;
}

raw_socket::~raw_socket() {
  close();
}

bool raw_socket::is_open() const noexcept {
  return impl_ && impl_->is_open();
}

const detail::raw_socket_core& raw_socket::core() const {
  if (!impl_)
    throw boost::system::system_error(asio::error::bad_descriptor, "raw_socket is closed");
  return *impl_;
}

const raw_caps& raw_socket::caps() const {
  return core().caps();
}

raw_statistics raw_socket::statistics() const {
  core();
  return impl_->statistics();
}

mac_address raw_socket::interface_mac() const {
  return core().interface().mac;
}
const std::string& raw_socket::interface_name() const {
  return core().interface().name;
}
unsigned raw_socket::interface_index() const {
  return core().interface().index;
}

void raw_socket::close() noexcept {
  if (!impl_)
    return;
  // Lent batches hold the core (and so the backend's buffer memory) until they
  // are released: they may outlive close() and the socket itself.
  impl_->close();
  impl_.reset();
}

void raw_socket::cancel() noexcept {
  if (impl_)
    impl_->cancel();
}

flow_handle raw_socket::add_flow(const flow_rule& rule) {
  error_code ec;
  auto handle = add_flow(rule, ec);
  if (ec)
    detail::throw_if(ec, "raw_socket::add_flow(" + to_string(rule) + ")");
  return handle;
}

flow_handle raw_socket::add_flow(const flow_rule& rule, error_code& ec) {
  if (!impl_) {
    ec = asio::error::bad_descriptor;
    return {};
  }
  return impl_->add_flow(rule, ec);
}

void raw_socket::set_flow(std::size_t index, const flow_rule& rule) {
  error_code ec;
  set_flow(index, rule, ec);
  if (ec)
    detail::throw_if(ec, "raw_socket::set_flow(" + std::to_string(index) + ", " + to_string(rule) + ")");
}

void raw_socket::set_flow(std::size_t index, const flow_rule& rule, error_code& ec) {
  if (!impl_) {
    ec = asio::error::bad_descriptor;
    return;
  }
  impl_->set_flow(index, rule, ec);
}

void raw_socket::clear_flow(std::size_t index) {
  error_code ec;
  clear_flow(index, ec);
  detail::throw_if(ec, "raw_socket::clear_flow");
}

void raw_socket::clear_flow(std::size_t index, error_code& ec) {
  if (!impl_) {
    ec = asio::error::bad_descriptor;
    return;
  }
  impl_->clear_flow(index, ec);
}

namespace detail {

void start_raw_receive(raw_socket_core* core, std::size_t max_packets,
                       std::chrono::nanoseconds timeout, raw_receive_operation&& pending) {
  core->start_receive(max_packets, timeout, std::move(pending));
}

void start_raw_acquire(raw_socket_core* core, std::size_t n, raw_acquire_operation&& pending) {
  core->start_acquire(n, std::move(pending));
}

void start_raw_send(raw_socket_core* core, send_batch batch, raw_send_operation&& pending) {
  core->start_send(std::move(batch), std::move(pending));
}

void start_raw_flush(raw_socket_core* core, raw_send_operation&& pending) {
  core->start_flush(std::move(pending));
}

} // namespace detail

// --- receive_batch ---

receive_batch& receive_batch::operator=(receive_batch&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::move(other.owner_);
    packets_ = std::move(other.packets_);
    other.packets_.clear();
  }
  return *this;
}

void receive_batch::release() noexcept {
  if (owner_)
    owner_->release_received(packets_);
  packets_.clear();
  owner_.reset();
}

// --- send_batch ---

send_batch& send_batch::operator=(send_batch&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::move(other.owner_);
    packets_ = std::move(other.packets_);
    other.packets_.clear();
  }
  return *this;
}

void send_batch::truncate(std::size_t n) noexcept {
  if (n >= packets_.size())
    return;
  if (owner_)
    owner_->return_send_buffers(std::span<const send_packet>(packets_).subspan(n));
  packets_.resize(n);
}

void send_batch::release() noexcept {
  truncate(0);
  owner_.reset();
}

// --- flow_handle ---

flow_handle::flow_handle(flow_handle&& other) noexcept
    : owner_(std::move(other.owner_)), index_(other.index_), generation_(other.generation_) {
  other.owner_.reset();
}

flow_handle& flow_handle::operator=(flow_handle&& other) noexcept {
  if (this != &other) {
    error_code ignored;
    remove(ignored);
    owner_ = std::move(other.owner_);
    index_ = other.index_;
    generation_ = other.generation_;
    other.owner_.reset();
  }
  return *this;
}

flow_handle::~flow_handle() {
  error_code ignored; // a destructor cannot report; remove(ec) can
  remove(ignored);
}

bool flow_handle::active() const noexcept {
  auto owner = owner_.lock();
  return owner && owner->owns_flow(index_, generation_);
}

void flow_handle::remove(error_code& ec) noexcept {
  ec = {};
  if (auto owner = owner_.lock(); owner && owner->owns_flow(index_, generation_)) {
    owner->clear_flow(index_, ec);
    if (ec)
      return; // still installed: the handle keeps it
  }
  owner_.reset();
}

void flow_handle::remove() {
  error_code ec;
  remove(ec);
  detail::throw_if(ec, "flow_handle::remove");
}

} // namespace asio_rdma
