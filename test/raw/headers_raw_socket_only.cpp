// Each public header of the raw socket compiles on its own (this file includes one; the
// other test files include the other first).
#include <asio_rdma/raw_socket.hpp>
