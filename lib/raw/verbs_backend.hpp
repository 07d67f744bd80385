// The verbs backend: an IBV_QPT_RAW_PACKET queue pair on the RDMA device that owns the
// interface, flow steering with ibv_create_flow, completion channels waited on by Asio.
// Only standard rdma-core calls.
#pragma once

#include "raw/backend.hpp"
#include "raw/interface_info.hpp"

#include <memory>

namespace asio_rdma::detail {

/// Opens the verbs backend. errc::no_device when no RDMA device owns the interface;
/// errc::raw_packet_unsupported when the device (or the process's permissions) cannot open a
/// raw packet queue pair. Options are validated.
std::unique_ptr<backend> open_verbs_backend(const interface_info& interface,
                                            const raw_socket_options& options, error_code& ec);

} // namespace asio_rdma::detail
