// file_receiver: the listener, the accept loops and stop() (see
// include/asio_rdma/file_transfer.hpp).
#include "asio_alias.hpp"
#include "receive_session.hpp"
#include "receiver_impl.hpp"
#include "spawn_operation.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <fcntl.h>

namespace asio_rdma::detail {

using asio::awaitable;

namespace {

using receive_outcome = std::pair<error_code, receive_result>;

file_receiver_options checked(file_receiver_options options) {
  if (options.transfer.problem())
    throw boost::system::system_error(errc::invalid_option, options.transfer.problem());
  if (options.acceptor.connection.max_message_size < file_protocol::max_message_size)
    throw boost::system::system_error(
        errc::invalid_option, "acceptor.connection.max_message_size must be at least 4124 bytes");
  return options;
}

unique_fd open_directory(const std::filesystem::path& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd)
    throw boost::system::system_error(from_errno(), "cannot store files in " + path.string() +
                                                        ": open the directory");
  return fd;
}

/// Stores a probe file in the directory as received files are stored; a
/// directory that cannot hold them is refused now, before any data flows.
commit_method probe(int directory_fd, const std::filesystem::path& path, bool durable) {
  error_code ec;
  const char* step = "";
  auto method = probe_commit_method(directory_fd, durable, step, ec);
  if (ec)
    throw boost::system::system_error(ec, "cannot store files in " + path.string() + ": " + step);
  return method;
}

/// Keeps a served connection in file_receiver_impl::active while it runs.
class active_registration {
public:
  active_registration(file_receiver_impl& impl, connection& conn) : impl_(impl), conn_(&conn) {
    impl_.active.insert(conn_);
  }
  active_registration(const active_registration&) = delete;
  active_registration& operator=(const active_registration&) = delete;
  ~active_registration() { impl_.active.erase(conn_); }

private:
  file_receiver_impl& impl_;
  connection* conn_;
};

/// Serves one accepted connection until the sender leaves, an error, or stop(). (Here, with
/// internal linkage: its coroutine frame holds this file's own types.)
awaitable<receive_outcome> serve_connection(std::shared_ptr<file_receiver_impl> impl,
                                            connection conn) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto start = std::chrono::steady_clock::now();
  receive_outcome out;
  out.second.peer = conn.remote_endpoint();
  {
    active_registration registration(*impl, conn);
    // Counted for the connection's lifetime; one over the limit is refused
    // at its hello.
    const auto address = out.second.peer.address();
    impl->count(address, &file_receiver_impl::peer_load::connections, +1);
    struct uncount {
      file_receiver_impl& impl;
      asio::ip::address address;
      ~uncount() { impl.count(address, &file_receiver_impl::peer_load::connections, -1); }
    } uncount_at_end{*impl, address};
    const auto limit = impl->options.max_connections_per_peer;
    bool over_limit = limit != 0 && impl->peers[address].connections > limit;
    receive_session session(*impl, conn, out.second, over_limit);
    try {
      out.first = co_await session.run();
    } catch (const boost::system::system_error& e) {
      out.first = e.code();
    }
    if (impl->stopped && out.first)
      out.first = asio::error::operation_aborted;
    // Before the session's slots are deregistered: no more writes can land.
    conn.close();
  }
  out.second.elapsed = std::chrono::steady_clock::now() - start;
  co_return out;
}

awaitable<receive_outcome> receive_one(std::shared_ptr<file_receiver_impl> impl) {
  co_await asio::this_coro::throw_if_cancelled(false);
  receive_outcome out;
  if (impl->stopped) {
    out.first = asio::error::operation_aborted;
    co_return out;
  }
  auto [ec, conn] = co_await impl->listener.async_accept(as_awaitable_tuple);
  if (ec || impl->stopped) {
    out.first = impl->stopped ? error_code(asio::error::operation_aborted) : ec;
    co_return out;
  }
  co_return co_await serve_connection(impl, std::move(conn));
}

awaitable<error_code> run(std::shared_ptr<file_receiver_impl> impl,
                          receive_session_callback on_session) {
  co_await asio::this_coro::throw_if_cancelled(false);
  auto ex = co_await asio::this_coro::executor;
  // Sessions still running; the loop waits for them after the listener stopped.
  auto running = std::make_shared<std::size_t>(0);
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  error_code result = asio::error::operation_aborted;
  while (!impl->stopped) {
    auto [ec, conn] = co_await impl->listener.async_accept(as_awaitable_tuple);
    auto cs = co_await asio::this_coro::cancellation_state;
    if (impl->stopped || cs.cancelled() != asio::cancellation_type::none)
      break;
    if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) {
      result = ec;
      break;
    }
    if (ec) // one failed handshake does not stop the server
      continue;
    ++*running;
    asio::co_spawn(ex, serve_connection(impl, std::move(conn)),
                   [running, &all_done, on_session](std::exception_ptr e, receive_outcome out) {
                     if (e)
                       out.first = exception_error(e);
                     if (on_session)
                       on_session(out.first, out.second);
                     if (--*running == 0)
                       all_done.cancel();
                   });
  }
  impl->stop(); // cancellation acts as stop(); sessions end promptly
  while (*running > 0)
    co_await all_done.async_wait(as_awaitable_tuple);
  co_return result;
}

} // namespace

file_receiver_impl::file_receiver_impl(const asio::any_io_executor& ex, const std::string& address,
                                       std::uint16_t port, const std::filesystem::path& dir,
                                       file_receiver_options opts)
    : ex(ex), options(checked(std::move(opts))), directory(std::filesystem::absolute(dir)),
      directory_fd(open_directory(directory)),
      commit_method(probe(directory_fd.get(), directory, options.fsync)),
      listener(ex, address, port, options.acceptor) {
  // Kept files of interrupted resumable transfers expire (resume_max_age).
  partial_file::remove_stale(directory, options.resume_max_age);
}

void file_receiver_impl::count(const asio::ip::address& peer, std::size_t peer_load::*what, int n) {
  auto& load = peers[peer];
  load.*what = n > 0 ? load.*what + 1 : load.*what - 1;
  if (load.connections == 0 && load.files == 0)
    peers.erase(peer);
}

void file_receiver_impl::stop() noexcept {
  stopped = true;
  listener.close();
  // close() completes the pending receive of each session, which then
  // unregisters; iterate over a copy.
  auto conns = active;
  for (auto* c : conns)
    c->close();
}

void start_receive_one(const std::shared_ptr<file_receiver_impl>& impl,
                       receive_one_operation&& pending) {
  spawn_operation(impl->ex, receive_one(impl), std::move(pending),
                  [ex = impl->ex](receive_one_operation& op, std::exception_ptr e, receive_outcome out) {
                    if (e)
                      out.first = exception_error(e);
                    op.complete(ex, from::completion_path, out.first, std::move(out.second));
                  });
}

void start_run(const std::shared_ptr<file_receiver_impl>& impl, receive_session_callback on_session,
               pending_operation<void(error_code)>&& pending) {
  spawn_operation(impl->ex, run(impl, std::move(on_session)), std::move(pending),
                  [ex = impl->ex](pending_operation<void(error_code)>& op, std::exception_ptr e,
                                  error_code ec) {
                    op.complete(ex, from::completion_path, e ? exception_error(e) : ec);
                  });
}

} // namespace asio_rdma::detail

namespace asio_rdma {

file_receiver::file_receiver(const executor_type& ex, const std::string& address,
                             std::uint16_t port, const std::filesystem::path& directory,
                             file_receiver_options options)
    : ex_(ex), impl_(std::make_shared<detail::file_receiver_impl>(ex, address, port, directory,
                                                                  std::move(options))) {}

file_receiver::file_receiver(file_receiver&&) noexcept = default;

file_receiver& file_receiver::operator=(file_receiver&& other) noexcept {
  if (this != &other) {
    stop();
    ex_ = std::move(other.ex_);
    impl_ = std::move(other.impl_);
  }
  return *this;
}

file_receiver::~file_receiver() {
  stop();
}

boost::asio::ip::tcp::endpoint file_receiver::local_endpoint() const {
  return impl_ ? impl_->listener.local_endpoint() : boost::asio::ip::tcp::endpoint();
}

const std::filesystem::path& file_receiver::directory() const {
  static const std::filesystem::path none;
  return impl_ ? impl_->directory : none;
}

commit_method file_receiver::commit_method() const {
  return impl_ ? impl_->commit_method : commit_method::rename_noreplace;
}

void file_receiver::set_buffer_size(std::size_t buffer_size, error_code& ec) {
  ec = {};
  file_transfer_options o = impl_ ? impl_->options.transfer : file_transfer_options();
  o.buffer_size = buffer_size;
  if (!impl_ || o.problem()) {
    ec = impl_ ? error_code(errc::invalid_option) : error_code(asio::error::bad_descriptor);
    return;
  }
  impl_->options.transfer.buffer_size = buffer_size;
}

void file_receiver::set_buffer_size(std::size_t buffer_size) {
  error_code ec;
  set_buffer_size(buffer_size, ec);
  if (ec)
    throw boost::system::system_error(ec, "file_receiver::set_buffer_size");
}

void file_receiver::stop() noexcept {
  if (impl_)
    impl_->stop();
}

} // namespace asio_rdma
