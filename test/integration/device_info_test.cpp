// Device enumeration on the device under test, cross-checked against what
// ibv_devinfo -v prints for it.
#define BOOST_TEST_MODULE integration_device_info
#include <boost/test/unit_test.hpp>

#include <asio_rdma/device_info.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace ar = asio_rdma;

namespace {

std::string device_name() {
  const char* name = std::getenv("ASIO_RDMA_DEVICE");
  if (!name || !*name)
    BOOST_FAIL("ASIO_RDMA_DEVICE is not set: run integration tests through test/vm/run.sh");
  return name;
}

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  const auto last = s.find_last_not_of(" \t\r\n");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// ibv_devinfo -v's "key: value" lines, device-wide and for port 1, and its
// GID lines ("GID[  0]: fe80:0000:...:3456, RoCE v2").
struct devinfo_output {
  std::map<std::string, std::string> device, port1;
  std::vector<std::pair<std::string, std::string>> gids; // address, type
};

devinfo_output run_ibv_devinfo(const std::string& name) {
  const std::string command = "ibv_devinfo -v -d " + name + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  BOOST_REQUIRE(pipe);
  devinfo_output out;
  int port = 0;
  char line[1024];
  while (std::fgets(line, sizeof line, pipe.get())) {
    const std::string l = line;
    const auto colon = l.find(':');
    if (colon == std::string::npos)
      continue;
    const auto key = trim(l.substr(0, colon));
    const auto value = trim(l.substr(colon + 1));
    if (key == "port") {
      port = std::atoi(value.c_str());
    } else if (key.rfind("GID[", 0) == 0 && port == 1) {
      const auto comma = value.find(',');
      out.gids.emplace_back(trim(value.substr(0, comma)),
                            comma == std::string::npos ? "" : trim(value.substr(comma + 1)));
    } else if (port == 0) {
      out.device.emplace(key, value);
    } else if (port == 1) {
      out.port1.emplace(key, value);
    }
  }
  return out;
}

// "1048560" or "0xffffffffffffffff"; ibv_devinfo adds " (4)" after names.
unsigned long long number(const std::string& text) {
  return std::stoull(text, nullptr, 0);
}

std::string first_word(const std::string& text) {
  return text.substr(0, text.find(' '));
}

} // namespace

BOOST_AUTO_TEST_CASE(device_under_test_is_listed_with_an_active_port) {
  const auto name = device_name();
  const auto devices = ar::list_devices();
  const auto it = std::find_if(devices.begin(), devices.end(),
                               [&](const ar::device_info& d) { return d.name == name; });
  BOOST_REQUIRE_MESSAGE(it != devices.end(),
                        name << " is not among " << devices.size() << " listed devices");
  std::ostringstream summary;
  summary << *it;
  BOOST_TEST_MESSAGE(summary.str());
  BOOST_REQUIRE(!it->ports.empty());
  const auto& port = it->ports[0];
  BOOST_TEST(port.number == 1);
  BOOST_TEST((port.state == ar::port_state::active));
  BOOST_TEST(!port.gids.empty());
  BOOST_TEST(it->limits.max_qp > 0);
  BOOST_TEST(it->limits.max_qp_wr > 0);
  BOOST_TEST(it->limits.max_sge > 0);
  BOOST_TEST(it->limits.max_cqe > 0);
  if (name.rfind("rxe", 0) == 0) {
    // SoftRoCE on the VM's veth0 at MTU 9000 (test/vm/README.md).
    BOOST_TEST((port.layer == ar::link_layer::ethernet));
    BOOST_TEST(port.active_mtu == 4096u);
    BOOST_TEST(it->transport == "InfiniBand");
  }
}

BOOST_AUTO_TEST_CASE(agrees_with_ibv_devinfo) {
  const auto name = device_name();
  ar::error_code ec;
  const auto info = ar::query_device(name, ec);
  BOOST_REQUIRE_MESSAGE(!ec, ec.message());
  const auto out = run_ibv_devinfo(name);
  const auto& d = out.device;
  BOOST_REQUIRE_MESSAGE(d.count("max_qp") == 1, "ibv_devinfo printed no max_qp");
  BOOST_TEST(d.at("hca_id") == name);
  BOOST_TEST(first_word(d.at("transport")) == info.transport);
  BOOST_TEST(d.at("fw_ver") == info.firmware_version);
  BOOST_TEST(number(d.at("max_mr_size")) == info.limits.max_mr_size);
  BOOST_TEST(number(d.at("max_qp")) == static_cast<unsigned long long>(info.limits.max_qp));
  BOOST_TEST(number(d.at("max_qp_wr")) == static_cast<unsigned long long>(info.limits.max_qp_wr));
  BOOST_TEST(number(d.at("max_sge")) == static_cast<unsigned long long>(info.limits.max_sge));
  BOOST_TEST(number(d.at("max_cqe")) == static_cast<unsigned long long>(info.limits.max_cqe));
  BOOST_TEST(number(d.at("max_qp_rd_atom")) ==
             static_cast<unsigned long long>(info.limits.max_qp_rd_atom));
  BOOST_TEST(number(d.at("max_mcast_grp")) ==
             static_cast<unsigned long long>(info.limits.max_mcast_grp));
  BOOST_TEST(first_word(d.at("atomic_cap")) == ar::to_string(info.limits.atomics));
  BOOST_TEST(number(d.at("phys_port_cnt")) == info.ports.size());

  BOOST_REQUIRE(!info.ports.empty());
  const auto& port = info.ports[0];
  const auto& p = out.port1;
  BOOST_REQUIRE_MESSAGE(p.count("state") == 1, "ibv_devinfo printed no port 1");
  BOOST_TEST(first_word(p.at("state")) == ar::to_string(port.state));
  BOOST_TEST(number(first_word(p.at("active_mtu"))) == port.active_mtu);
  BOOST_TEST(number(first_word(p.at("max_mtu"))) == port.max_mtu);
  BOOST_TEST(p.at("link_layer") == ar::to_string(port.layer));
  BOOST_TEST(number(p.at("max_msg_sz")) == port.max_message_size);
  BOOST_TEST(number(p.at("port_lid")) == port.lid);

  if (info.transport == "iWARP") {
    // ibv_devinfo lists the GID table the kernel keeps for InfiniBand and RoCE, which an
    // iWARP device has not; the device's own GID (siw: from its MAC) is still there.
    BOOST_TEST(out.gids.empty());
    BOOST_TEST(port.gids.size() == 1u);
    return;
  }
  // The same GIDs, in the same order, of the same types.
  BOOST_REQUIRE(out.gids.size() == port.gids.size());
  for (std::size_t i = 0; i < port.gids.size(); ++i) {
    std::array<std::uint8_t, 16> raw{};
    BOOST_REQUIRE(::inet_pton(AF_INET6, out.gids[i].first.c_str(), raw.data()) == 1);
    BOOST_TEST((raw == port.gids[i].raw), "GID " << i << ": ibv_devinfo " << out.gids[i].first
                                                 << ", asio_rdma " << port.gids[i].to_string());
    if (!out.gids[i].second.empty())
      BOOST_TEST(out.gids[i].second == ar::to_string(port.gids[i].type));
  }
}
