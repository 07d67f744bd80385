// The shared state of a file_receiver: the listener, the directory, the
// options, and the connections being served (so that stop() can close them).
#pragma once

#include "partial_file.hpp"

#include <asio_rdma/file_transfer.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <boost/asio/ip/address.hpp>

#include <map>
#include <set>

namespace asio_rdma::detail {

class file_receiver_impl {
public:
  file_receiver_impl(const boost::asio::any_io_executor& ex, const std::string& address,
                     std::uint16_t port, const std::filesystem::path& directory,
                     file_receiver_options options);

  /// Closes the listener and every connection being served.
  void stop() noexcept;

  boost::asio::any_io_executor ex;
  file_receiver_options options;
  std::filesystem::path directory;
  unique_fd directory_fd;
  /// How files are committed without replacing there (probed at start).
  asio_rdma::commit_method commit_method;
  acceptor listener;
  bool stopped = false;
  /// Connections being served; a session registers while it runs.
  std::set<connection*> active;
  /// Per peer address: connections being served and files being received
  /// (file_receiver_options' per-peer limits). Entries at zero are erased.
  struct peer_load {
    std::size_t connections = 0;
    std::size_t files = 0;
  };
  std::map<boost::asio::ip::address, peer_load> peers;
  /// Adds `n` (+1 or -1) to a peer's count, erasing the entry at zero.
  void count(const boost::asio::ip::address& peer, std::size_t peer_load::*what, int n);
};

} // namespace asio_rdma::detail
