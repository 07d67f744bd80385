// asio-rdma: the umbrella header: every public header of the library.
//
// raw_socket.hpp and flow_rule.hpp only declare: they compile whether or not
// the library was built with the raw socket (ASIO_RDMA_WITH_RAW_SOCKET), and
// only a program that uses the socket needs a library built with it.
#pragma once

#include <asio_rdma/acceptor.hpp>
#include <asio_rdma/batch_entry.hpp>
#include <asio_rdma/buffer_pool.hpp>
#include <asio_rdma/completion_mode.hpp>
#include <asio_rdma/connect.hpp>
#include <asio_rdma/connection.hpp>
#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/connection_request.hpp>
#include <asio_rdma/connection_statistics.hpp>
#include <asio_rdma/datagram_socket.hpp>
#include <asio_rdma/device_info.hpp>
#include <asio_rdma/error.hpp>
#include <asio_rdma/file_transfer.hpp>
#include <asio_rdma/flow_rule.hpp>
#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/prepared_queue_pair.hpp>
#include <asio_rdma/queue_pair_endpoint.hpp>
#include <asio_rdma/raw_socket.hpp>
#include <asio_rdma/remote_buffer.hpp>
#include <asio_rdma/rpc.hpp>
#include <asio_rdma/shared_queues.hpp>
#include <asio_rdma/stream.hpp>
#include <asio_rdma/stream_websocket.hpp>
