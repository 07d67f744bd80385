#include <asio_rdma/device_info.hpp>

#include "verbs/gid_table.hpp"
#include "verbs/handles.hpp"
#include "throw_if.hpp"
#include "verbs/verbs_error.hpp"

#include <boost/system/system_error.hpp>

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <ostream>

namespace asio_rdma {
namespace {

using detail::context_ptr;
using detail::device_list_ptr;

std::string_view transport_name(ibv_transport_type t) {
  switch (t) {
  case IBV_TRANSPORT_IB:
    return "InfiniBand";
  case IBV_TRANSPORT_IWARP:
    return "iWARP";
  case IBV_TRANSPORT_USNIC:
    return "usNIC";
  case IBV_TRANSPORT_USNIC_UDP:
    return "usNIC UDP";
  case IBV_TRANSPORT_UNSPECIFIED:
    break;
  default:
    break;
  }
  return "unspecified";
}

// ibv_port_attr::active_width: 1, 4, 8, 12 or 2 lanes.
int lanes_of(std::uint8_t code) {
  switch (code) {
  case 1:
    return 1;
  case 2:
    return 4;
  case 4:
    return 8;
  case 8:
    return 12;
  case 16:
    return 2;
  }
  return 0;
}

// ibv_port_attr::active_speed: per-lane rate (SDR ... NDR).
double lane_gbps_of(std::uint8_t code) {
  switch (code) {
  case 1:
    return 2.5;
  case 2:
    return 5.0;
  case 4:
    return 10.0;
  case 8:
    return 10.0; // FDR10
  case 16:
    return 14.0;
  case 32:
    return 25.0;
  case 64:
    return 50.0;
  case 128:
    return 100.0;
  }
  return 0;
}

error_code query_port(ibv_context* context, std::uint8_t number, port_info& port) {
  ibv_port_attr attr{};
  if (int rc = ::ibv_query_port(context, number, &attr))
    return detail::from_returned_errno(rc);
  port.number = number;
  port.state = static_cast<port_state>(attr.state);
  port.layer = static_cast<link_layer>(attr.link_layer);
  port.max_mtu = attr.max_mtu == 0 ? 0 : 128u << attr.max_mtu;
  port.active_mtu = attr.active_mtu == 0 ? 0 : 128u << attr.active_mtu;
  port.max_message_size = attr.max_msg_sz;
  port.active_width_code = attr.active_width;
  port.active_speed_code = attr.active_speed;
  port.lanes = lanes_of(attr.active_width);
  port.lane_gbps = lane_gbps_of(attr.active_speed);
  port.lid = attr.lid;
  port.sm_lid = attr.sm_lid;
  port.gid_table_length = attr.gid_tbl_len;
  // Each index alone (verbs/gid_table.hpp): ibv_query_gid_table reports the whole
  // device, and a table entry that is not in use is simply left out.
  return detail::for_each_gid(context, number, attr.gid_tbl_len, attr.link_layer,
                              [&](const ibv_gid_entry& entry) {
                                gid_entry g;
                                g.index = entry.gid_index;
                                std::copy(std::begin(entry.gid.raw), std::end(entry.gid.raw),
                                          g.raw.begin());
                                g.type = static_cast<gid_type>(entry.gid_type);
                                g.netdev_index = entry.ndev_ifindex;
                                port.gids.push_back(g);
                                return true;
                              });
}

error_code query(ibv_device* device, device_info& info) {
  info.name = ::ibv_get_device_name(device);
  info.transport = transport_name(device->transport_type);
  // iWARP's transport has neither immediate data nor unreliable datagrams.
  info.immediate_data = device->transport_type != IBV_TRANSPORT_IWARP;
  info.datagrams = device->transport_type != IBV_TRANSPORT_IWARP;
  context_ptr context(::ibv_open_device(device));
  if (!context)
    return detail::from_errno();
  ibv_device_attr attr{};
  if (int rc = ::ibv_query_device(context.get(), &attr))
    return detail::from_returned_errno(rc);
  info.firmware_version = attr.fw_ver;
  info.node_guid = be64toh(attr.node_guid);
  info.sys_image_guid = be64toh(attr.sys_image_guid);
  info.vendor_id = attr.vendor_id;
  info.vendor_part_id = attr.vendor_part_id;
  info.hardware_version = attr.hw_ver;
  auto& l = info.limits;
  l.max_mr_size = attr.max_mr_size;
  l.page_size_cap = attr.page_size_cap;
  l.max_qp = attr.max_qp;
  l.max_qp_wr = attr.max_qp_wr;
  l.max_sge = attr.max_sge;
  l.max_sge_rd = attr.max_sge_rd;
  l.max_cq = attr.max_cq;
  l.max_cqe = attr.max_cqe;
  l.max_mr = attr.max_mr;
  l.max_pd = attr.max_pd;
  l.max_qp_rd_atom = attr.max_qp_rd_atom;
  l.max_qp_init_rd_atom = attr.max_qp_init_rd_atom;
  l.max_srq = attr.max_srq;
  l.max_srq_wr = attr.max_srq_wr;
  l.max_srq_sge = attr.max_srq_sge;
  l.max_ah = attr.max_ah;
  l.max_mcast_grp = attr.max_mcast_grp;
  l.max_mcast_qp_attach = attr.max_mcast_qp_attach;
  l.max_total_mcast_qp_attach = attr.max_total_mcast_qp_attach;
  l.atomics = static_cast<atomic_capability>(attr.atomic_cap);
  info.ports.resize(attr.phys_port_cnt);
  for (std::uint8_t p = 1; p <= attr.phys_port_cnt; ++p)
    if (auto ec = query_port(context.get(), p, info.ports[p - 1]))
      return ec;
  return {};
}

// The device list, or an empty one where the kernel has no RDMA support.
device_list_ptr get_list(int& count, error_code& ec) {
  count = 0;
  errno = 0;
  device_list_ptr list(::ibv_get_device_list(&count));
  if (!list) {
    ec = errno == ENOSYS ? error_code() : detail::from_errno();
    count = 0;
  } else {
    ec = {};
  }
  return list;
}


} // namespace

std::string_view to_string(port_state s) noexcept {
  switch (s) {
  case port_state::nop:
    return "PORT_NOP";
  case port_state::down:
    return "PORT_DOWN";
  case port_state::init:
    return "PORT_INIT";
  case port_state::armed:
    return "PORT_ARMED";
  case port_state::active:
    return "PORT_ACTIVE";
  case port_state::active_defer:
    return "PORT_ACTIVE_DEFER";
  }
  return "invalid state";
}

std::string_view to_string(link_layer l) noexcept {
  switch (l) {
  case link_layer::infiniband:
    return "InfiniBand";
  case link_layer::ethernet:
    return "Ethernet";
  case link_layer::unspecified:
    break;
  }
  return "Unspecified";
}

std::string_view to_string(gid_type t) noexcept {
  switch (t) {
  case gid_type::ib:
    return "IB";
  case gid_type::roce_v1:
    return "RoCE v1";
  case gid_type::roce_v2:
    return "RoCE v2";
  }
  return "unknown";
}

std::string_view to_string(atomic_capability a) noexcept {
  switch (a) {
  case atomic_capability::none:
    return "ATOMIC_NONE";
  case atomic_capability::device:
    return "ATOMIC_HCA";
  case atomic_capability::global:
    return "ATOMIC_GLOB";
  }
  return "unknown";
}

std::string gid_entry::to_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, raw.data(), text, sizeof text);
  return text;
}

std::vector<device_info> list_devices(error_code& ec) {
  int count = 0;
  auto list = get_list(count, ec);
  std::vector<device_info> devices;
  if (ec)
    return devices;
  devices.resize(count);
  for (int i = 0; i < count; ++i)
    if ((ec = query(list.get()[i], devices[i]))) {
      devices.clear();
      return devices;
    }
  return devices;
}

std::vector<device_info> list_devices() {
  error_code ec;
  auto devices = list_devices(ec);
  detail::throw_if(ec, "asio_rdma::list_devices");
  return devices;
}

device_info query_device(std::string_view name, error_code& ec) {
  int count = 0;
  auto list = get_list(count, ec);
  device_info info;
  if (ec)
    return info;
  for (int i = 0; i < count; ++i)
    if (name == ::ibv_get_device_name(list.get()[i])) {
      if ((ec = query(list.get()[i], info)))
        info = {};
      return info;
    }
  ec = errc::no_device;
  return info;
}

device_info query_device(std::string_view name) {
  error_code ec;
  auto info = query_device(name, ec);
  detail::throw_if(ec, "asio_rdma::query_device");
  return info;
}

std::ostream& operator<<(std::ostream& os, const device_info& d) {
  const auto& l = d.limits;
  os << d.name << " (" << d.transport << ", fw " << d.firmware_version << "): max_qp " << l.max_qp
     << ", max_qp_wr " << l.max_qp_wr << ", max_sge " << l.max_sge << ", max_cqe " << l.max_cqe
     << ", max_mr_size " << l.max_mr_size << ", max_qp_rd_atom " << l.max_qp_rd_atom << ", "
     << to_string(l.atomics) << "\n";
  for (const auto& p : d.ports) {
    os << "  port " << int(p.number) << ": " << to_string(p.state) << ", " << to_string(p.layer)
       << ", active_mtu " << p.active_mtu << " (max " << p.max_mtu << "), " << p.lanes << "x "
       << p.lane_gbps << " Gb/s, " << p.gids.size() << " GIDs\n";
    for (const auto& g : p.gids)
      os << "    GID[" << g.index << "] " << g.to_string() << " " << to_string(g.type) << "\n";
  }
  return os;
}

} // namespace asio_rdma
