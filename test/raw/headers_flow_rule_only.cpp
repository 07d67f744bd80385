#include <asio_rdma/flow_rule.hpp>
