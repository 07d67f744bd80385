// Fuzzes the text parsers of the raw-packet socket (MAC and dotted IPv4
// addresses, as users and raw_ping's command line give them) and flow rules
// built from arbitrary field values: normalize, to_string, and the rules'
// compilation to classic BPF, whose program is then run on a frame.
// Invariants: a parsed address prints back to text that parses to the same
// address; refused text is asio::error::invalid_argument (and the throwing overload
// throws boost::system::system_error); normalized rules compile to a program
// within the kernel's limits whose verdict on any frame is the reference
// matcher's (test/raw/reference_match.hpp).
#include "fuzz_check.hpp"

#include "bpf_filter.hpp"
#include "reference_match.hpp"

#include <asio_rdma/flow_rule.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

namespace {

class input {
public:
  input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() << 8 | byte()); }
  std::uint32_t u32() { return std::uint32_t(u16()) << 16 | u16(); }
  std::vector<std::uint8_t> rest() { return {data_ + pos_, data_ + size_}; }

private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

void check_mac_text(std::string_view text) {
  asio_rdma::error_code ec;
  const auto mac = asio_rdma::parse_mac_address(text, ec);
  bool threw = false;
  try {
    FUZZ_CHECK(asio_rdma::parse_mac_address(text) == mac);
  } catch (const boost::system::system_error& e) {
    threw = true;
    FUZZ_CHECK(e.code() == boost::asio::error::invalid_argument);
  }
  FUZZ_CHECK(threw == bool(ec));
  if (ec) {
    FUZZ_CHECK(ec == boost::asio::error::invalid_argument);
    return;
  }
  const auto again = asio_rdma::parse_mac_address(asio_rdma::to_string(mac), ec);
  FUZZ_CHECK(!ec && again == mac);
}

void check_ipv4_text(std::string_view text) {
  asio_rdma::error_code ec;
  const auto address = asio_rdma::parse_ipv4_address(text, ec);
  bool threw = false;
  try {
    FUZZ_CHECK(asio_rdma::parse_ipv4_address(text) == address);
  } catch (const boost::system::system_error& e) {
    threw = true;
    FUZZ_CHECK(e.code() == boost::asio::error::invalid_argument);
  }
  FUZZ_CHECK(threw == bool(ec));
  if (ec) {
    FUZZ_CHECK(ec == boost::asio::error::invalid_argument);
    return;
  }
  const auto again = asio_rdma::parse_ipv4_address(address.to_string(), ec);
  FUZZ_CHECK(!ec && again == address);
}

asio_rdma::mac_address mac_from(input& in) {
  asio_rdma::mac_address mac;
  for (auto& b : mac.bytes)
    b = in.byte();
  return mac;
}

asio_rdma::flow_rule rule_from(input& in) {
  asio_rdma::flow_rule rule;
  const std::uint16_t present = in.u16();
  if (present & 1)
    rule.destination_mac = mac_from(in);
  if (present & 2)
    rule.source_mac = mac_from(in);
  if (present & 4)
    rule.ethertype = in.u16();
  if (present & 8)
    rule.vlan_id = in.u16();
  if (present & 16)
    rule.ipv4_source = boost::asio::ip::address_v4(in.u32());
  if (present & 32)
    rule.ipv4_destination = boost::asio::ip::address_v4(in.u32());
  if (present & 64)
    rule.protocol = (in.byte() & 1) ? asio_rdma::ip_protocol::udp : asio_rdma::ip_protocol::tcp;
  if (present & 128)
    rule.source_port = in.u16();
  if (present & 256)
    rule.destination_port = in.u16();
  return rule;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_mac_text(text);
  check_ipv4_text(text);

  input in(data, size);
  std::vector<asio_rdma::flow_rule> rules;
  const std::size_t count = in.byte() % 4;
  for (std::size_t i = 0; i < count; ++i) {
    const auto rule = rule_from(in);
    asio_rdma::error_code ec;
    const auto normal = asio_rdma::normalize(rule, ec);
    FUZZ_CHECK(!asio_rdma::to_string(rule).empty());
    if (ec) {
      FUZZ_CHECK(ec == asio_rdma::errc::invalid_option);
      FUZZ_CHECK(normal == rule);
      continue;
    }
    // Normalizing is idempotent.
    FUZZ_CHECK(asio_rdma::normalize(normal, ec) == normal && !ec);
    rules.push_back(normal);
  }

  constexpr std::uint32_t snap = 65535;
  const auto program = asio_rdma::detail::compile_flow_filter(rules, snap);
  FUZZ_CHECK(!program.empty() && program.size() <= BPF_MAXINSNS);
  FUZZ_CHECK(program.size() <= 1 + rules.size() * asio_rdma::detail::max_bpf_instructions_per_rule);

  // The program, run on what an AF_PACKET socket sees of the rest of the input
  // as a wire frame, agrees with the reference matcher on that wire frame.
  const std::vector<std::uint8_t> wire = in.rest();
  const std::uint32_t verdict = raw_test::run_bpf(program, raw_test::kernel_view(wire));
  FUZZ_CHECK(verdict == 0 || verdict == snap);
  FUZZ_CHECK((verdict != 0) == raw_test::reference_match(rules, wire));
  return 0;
}
