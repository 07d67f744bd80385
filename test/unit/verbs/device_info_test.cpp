// The device enumeration API on a machine that may have no RDMA device: it
// must answer (an empty list, or a clear error), never crash.
#define BOOST_TEST_MODULE unit_device_info
#include <boost/test/unit_test.hpp>

#include <asio_rdma/device_info.hpp>

#include <boost/system/system_error.hpp>

#include <filesystem>
#include <sstream>

namespace ar = asio_rdma;

namespace {
// Devices the kernel exposes; libibverbs lists those it has a provider for.
std::size_t kernel_devices() {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/sys/class/infiniband", ec);
       !ec && it != std::filesystem::directory_iterator(); ++it)
    ++n;
  return n;
}
} // namespace

BOOST_AUTO_TEST_CASE(list_matches_the_kernel) {
  ar::error_code ec;
  auto devices = ar::list_devices(ec);
  BOOST_TEST(!ec, ec.message());
  if (kernel_devices() == 0) {
    BOOST_TEST(devices.empty());
  } else {
    BOOST_TEST(!devices.empty());
    for (const auto& d : devices) {
      BOOST_TEST(!d.name.empty());
      BOOST_TEST(!d.ports.empty());
      BOOST_TEST(d.limits.max_qp > 0);
    }
  }
  // The throwing overload agrees.
  BOOST_TEST(ar::list_devices().size() == devices.size());
}

BOOST_AUTO_TEST_CASE(unknown_device_is_no_device) {
  ar::error_code ec;
  auto info = ar::query_device("no_such_device_42", ec);
  BOOST_TEST((ec == ar::errc::no_device), ec.message());
  BOOST_TEST(info.name.empty());
  BOOST_TEST(info.ports.empty());
  try {
    (void)ar::query_device("no_such_device_42");
    BOOST_FAIL("query_device did not throw");
  } catch (const boost::system::system_error& e) {
    BOOST_TEST((e.code() == ar::errc::no_device));
  }
}

BOOST_AUTO_TEST_CASE(names_as_ibv_devinfo_spells_them) {
  BOOST_TEST(ar::to_string(ar::port_state::active) == "PORT_ACTIVE");
  BOOST_TEST(ar::to_string(ar::port_state::down) == "PORT_DOWN");
  BOOST_TEST(ar::to_string(ar::link_layer::ethernet) == "Ethernet");
  BOOST_TEST(ar::to_string(ar::link_layer::infiniband) == "InfiniBand");
  BOOST_TEST(ar::to_string(ar::gid_type::roce_v2) == "RoCE v2");
  BOOST_TEST(ar::to_string(ar::atomic_capability::device) == "ATOMIC_HCA");
}

BOOST_AUTO_TEST_CASE(gid_in_ipv6_notation) {
  ar::gid_entry g;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  BOOST_TEST(g.to_string() == "::ffff:192.0.2.1");
  g.raw = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56};
  BOOST_TEST(g.to_string() == "fe80::5054:ff:fe12:3456");
}

BOOST_AUTO_TEST_CASE(summary_prints_ports_and_gids) {
  ar::device_info d;
  d.name = "dev0";
  d.transport = "InfiniBand";
  d.limits.max_qp = 7;
  ar::port_info p;
  p.number = 1;
  p.state = ar::port_state::active;
  p.layer = ar::link_layer::ethernet;
  p.active_mtu = 4096;
  p.gids.push_back({});
  d.ports.push_back(p);
  std::ostringstream os;
  os << d;
  const auto text = os.str();
  BOOST_TEST(text.find("dev0") != std::string::npos);
  BOOST_TEST(text.find("max_qp 7") != std::string::npos);
  BOOST_TEST(text.find("port 1: PORT_ACTIVE, Ethernet, active_mtu 4096") != std::string::npos);
  BOOST_TEST(text.find("GID[0] ::") != std::string::npos);
}
