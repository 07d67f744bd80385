// rdma_fabric: MPI for the bootstrap only (rank, size, exchanging addresses,
// gathering results) and for barriers; no measured traffic goes through it.
// Every wait is bounded: MPI may wait forever for a rank that died, so each
// collective is started non-blocking and tested while the io_context keeps
// serving this rank's RDMA peers; past the timeout the job is aborted with
// a message that says what was awaited.
#pragma once

#include <boost/asio/io_context.hpp>

#include <mpi.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

namespace rdma_fabric {

class bootstrap {
public:
  /// MPI_Init. Throws std::runtime_error when it fails.
  bootstrap(int& argc, char**& argv);
  ~bootstrap(); ///< MPI_Finalize (unless aborted).
  bootstrap(const bootstrap&) = delete;
  bootstrap& operator=(const bootstrap&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Seconds each collective may take before the job is aborted.
  void set_timeout(double seconds) { timeout_ = seconds; }
  /// A line added to the message of a timeout (e.g. a failure seen earlier
  /// that explains why a rank is missing).
  void set_context(std::string text) { context_ = std::move(text); }

  /// Prints "rdma_fabric: rank R (HOST): message" to stderr and aborts the
  /// whole job (MPI_Abort) with `status`.
  [[noreturn]] void abort(const std::string& message, int status = 3);

  void barrier(boost::asio::io_context& io, const std::string& what);

  /// Every rank's `mine` (trivially copyable), in rank order.
  template <typename T>
  std::vector<T> allgather(const T& mine, boost::asio::io_context& io, const std::string& what) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> all(size_);
    allgather_bytes(&mine, all.data(), sizeof(T), io, what);
    return all;
  }

  /// Rank 0 gets every rank's `mine` (each of the same length) one after
  /// the other; the other ranks get an empty vector.
  template <typename T>
  std::vector<T> gather(const std::vector<T>& mine, boost::asio::io_context& io,
                        const std::string& what) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> all(rank_ == 0 ? mine.size() * size_ : 0);
    gather_bytes(mine.data(), all.data(), mine.size() * sizeof(T), io, what);
    return all;
  }

  /// Rank 0's `data` (of the same length everywhere) to every rank.
  template <typename T>
  void broadcast(std::vector<T>& data, boost::asio::io_context& io, const std::string& what) {
    static_assert(std::is_trivially_copyable_v<T>);
    broadcast_bytes(data.data(), data.size() * sizeof(T), io, what);
  }

private:
  void wait(MPI_Request& request, boost::asio::io_context& io, const std::string& what);
  void allgather_bytes(const void* mine, void* all, std::size_t bytes, boost::asio::io_context& io,
                       const std::string& what);
  void gather_bytes(const void* mine, void* all, std::size_t bytes, boost::asio::io_context& io,
                    const std::string& what);
  void broadcast_bytes(void* data, std::size_t bytes, boost::asio::io_context& io,
                       const std::string& what);
  void check(int status, const char* call);

  int rank_ = 0;
  int size_ = 0;
  double timeout_ = 60;
  std::string context_;
  std::string host_;
};

} // namespace rdma_fabric
