#include "bootstrap.hpp"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace rdma_fabric {

bootstrap::bootstrap(int& argc, char**& argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init failed");
  // Errors are returned (and reported with the rank) rather than fatal.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  host_ = name;
}

bootstrap::~bootstrap() {
  MPI_Finalize();
}

void bootstrap::abort(const std::string& message, int status) {
  std::cerr << "rdma_fabric: rank " << rank_ << " (" << host_ << "): " << message << std::endl;
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status); // MPI_Abort does not return; should it, do not finalize.
}

void bootstrap::check(int status, const char* call) {
  if (status == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  abort(std::string(call) + " failed: " + text);
}

void bootstrap::wait(MPI_Request& request, boost::asio::io_context& io, const std::string& what) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(timeout_));
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done)
      return;
    if (clock::now() > deadline)
      abort("no answer from the other ranks within " + std::to_string(int(timeout_)) +
            " s while waiting for " + what + " (a rank or its host died or hangs)" +
            (context_.empty() ? "" : "; " + context_));
    // This rank keeps serving its RDMA peers while it waits.
    if (io.stopped())
      io.restart();
    io.run_for(std::chrono::milliseconds(2));
  }
}

void bootstrap::barrier(boost::asio::io_context& io, const std::string& what) {
  MPI_Request request;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
  wait(request, io, what);
}

namespace {

int count(std::size_t bytes) {
  if (bytes > std::size_t(INT_MAX))
    throw std::length_error("rdma_fabric: message too large for MPI");
  return int(bytes);
}

} // namespace

void bootstrap::allgather_bytes(const void* mine, void* all, std::size_t bytes,
                                boost::asio::io_context& io, const std::string& what) {
  MPI_Request request;
  check(MPI_Iallgather(mine, count(bytes), MPI_BYTE, all, count(bytes), MPI_BYTE, MPI_COMM_WORLD,
                       &request),
        "MPI_Iallgather");
  wait(request, io, what);
}

void bootstrap::gather_bytes(const void* mine, void* all, std::size_t bytes,
                             boost::asio::io_context& io, const std::string& what) {
  MPI_Request request;
  check(MPI_Igather(mine, count(bytes), MPI_BYTE, all, count(bytes), MPI_BYTE, 0, MPI_COMM_WORLD,
                    &request),
        "MPI_Igather");
  wait(request, io, what);
}

void bootstrap::broadcast_bytes(void* data, std::size_t bytes, boost::asio::io_context& io,
                                const std::string& what) {
  MPI_Request request;
  check(MPI_Ibcast(data, count(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &request), "MPI_Ibcast");
  wait(request, io, what);
}

} // namespace rdma_fabric
