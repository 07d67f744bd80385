#include "raw/bpf_filter.hpp"

#include <algorithm>

namespace asio_rdma::detail {
namespace {

constexpr std::uint32_t ancillary(std::uint32_t offset) {
  return static_cast<std::uint32_t>(SKF_AD_OFF) + offset;
}

// Offsets in a frame as the socket sees it (no 802.1Q tag in the data).
constexpr std::uint32_t ethertype_offset = 12;
constexpr std::uint32_t ip_offset = 14;
constexpr std::uint32_t ip_fragment_offset = ip_offset + 6;
constexpr std::uint32_t ip_protocol_offset = ip_offset + 9;
constexpr std::uint32_t ip_source_offset = ip_offset + 12;
constexpr std::uint32_t ip_destination_offset = ip_offset + 16;

// Emits one rule; jumps to "the next rule" are recorded and patched once the rule's length is
// known (classic BPF jumps are relative and forward only).
class rule_emitter {
public:
  explicit rule_emitter(std::vector<sock_filter>& program)
      : program_(program), start_(program.size()) {}

  void statement(std::uint16_t code, std::uint32_t k) { program_.push_back(BPF_STMT(code, k)); }

  // Continue when A == k, else go to the next rule.
  void expect_equal(std::uint32_t k) { fail_on_false(BPF_JMP | BPF_JEQ | BPF_K, k); }
  // Continue when A >= k, else go to the next rule.
  void expect_at_least(std::uint32_t k) { fail_on_false(BPF_JMP | BPF_JGE | BPF_K, k); }
  // Continue when A >= X, else go to the next rule.
  void expect_at_least_x() { fail_on_false(BPF_JMP | BPF_JGE | BPF_X, 0); }
  // Go to the next rule when A & k != 0.
  void reject_if_any_bit(std::uint32_t k) {
    fail_jumps_.push_back({program_.size(), true});
    program_.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, k, 0, 0));
  }

  void accept(std::uint32_t snap_length) {
    statement(BPF_RET | BPF_K, snap_length);
    const std::size_t next_rule = program_.size();
    for (auto [index, on_true] : fail_jumps_) {
      const auto offset = static_cast<std::uint8_t>(next_rule - (index + 1));
      (on_true ? program_[index].jt : program_[index].jf) = offset;
    }
  }

  std::size_t length() const { return program_.size() - start_; }

private:
  void fail_on_false(std::uint16_t code, std::uint32_t k) {
    fail_jumps_.push_back({program_.size(), false});
    program_.push_back(BPF_JUMP(code, k, 0, 0));
  }

  struct fail_jump {
    std::size_t index;
    bool on_true;
  };
  std::vector<sock_filter>& program_;
  std::size_t start_;
  std::vector<fail_jump> fail_jumps_;
};

std::uint32_t high_four(const mac_address& mac) {
  return std::uint32_t{mac.bytes[0]} << 24 | std::uint32_t{mac.bytes[1]} << 16 |
         std::uint32_t{mac.bytes[2]} << 8 | mac.bytes[3];
}
std::uint32_t low_two(const mac_address& mac) {
  return std::uint32_t{mac.bytes[4]} << 8 | mac.bytes[5];
}

// The frame length every fixed-offset load of the rule needs.
std::uint32_t fixed_length_needed(const flow_rule& rule) {
  std::uint32_t needed = 0;
  auto need = [&needed](std::uint32_t end) { needed = std::max(needed, end); };
  if (rule.destination_mac)
    need(6);
  if (rule.source_mac)
    need(12);
  if (rule.ethertype)
    need(ethertype_offset + 2);
  if (rule.protocol)
    need(ip_protocol_offset + 1);
  if (rule.ipv4_source)
    need(ip_source_offset + 4);
  if (rule.ipv4_destination)
    need(ip_destination_offset + 4);
  if (rule.source_port || rule.destination_port)
    need(ip_fragment_offset + 2);
  return needed;
}

void emit_rule(std::vector<sock_filter>& program, const flow_rule& rule,
               std::uint32_t snap_length) {
  rule_emitter e(program);
  if (auto needed = fixed_length_needed(rule); needed > 0) {
    e.statement(BPF_LD | BPF_W | BPF_LEN, 0);
    e.expect_at_least(needed);
  }
  if (rule.vlan_id) {
    e.statement(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TAG_PRESENT));
    e.expect_equal(1);
    e.statement(BPF_LD | BPF_W | BPF_ABS, ancillary(SKF_AD_VLAN_TAG));
    e.statement(BPF_ALU | BPF_AND | BPF_K, 0x0fff);
    e.expect_equal(*rule.vlan_id);
  }
  if (rule.destination_mac) {
    e.statement(BPF_LD | BPF_W | BPF_ABS, 0);
    e.expect_equal(high_four(*rule.destination_mac));
    e.statement(BPF_LD | BPF_H | BPF_ABS, 4);
    e.expect_equal(low_two(*rule.destination_mac));
  }
  if (rule.source_mac) {
    e.statement(BPF_LD | BPF_W | BPF_ABS, 6);
    e.expect_equal(high_four(*rule.source_mac));
    e.statement(BPF_LD | BPF_H | BPF_ABS, 10);
    e.expect_equal(low_two(*rule.source_mac));
  }
  if (rule.ethertype) {
    e.statement(BPF_LD | BPF_H | BPF_ABS, ethertype_offset);
    e.expect_equal(*rule.ethertype);
  }
  if (rule.ipv4_source) {
    e.statement(BPF_LD | BPF_W | BPF_ABS, ip_source_offset);
    e.expect_equal(rule.ipv4_source->to_uint());
  }
  if (rule.ipv4_destination) {
    e.statement(BPF_LD | BPF_W | BPF_ABS, ip_destination_offset);
    e.expect_equal(rule.ipv4_destination->to_uint());
  }
  if (rule.protocol) {
    e.statement(BPF_LD | BPF_B | BPF_ABS, ip_protocol_offset);
    e.expect_equal(static_cast<std::uint32_t>(*rule.protocol));
  }
  if (rule.source_port || rule.destination_port) {
    // Later fragments carry no transport header.
    e.statement(BPF_LD | BPF_H | BPF_ABS, ip_fragment_offset);
    e.reject_if_any_bit(0x1fff);
    // X = IPv4 header length; the frame must hold both ports at ip_offset + X.
    e.statement(BPF_LDX | BPF_B | BPF_MSH, ip_offset);
    e.statement(BPF_MISC | BPF_TXA, 0);
    e.statement(BPF_ALU | BPF_ADD | BPF_K, ip_offset + 4);
    e.statement(BPF_MISC | BPF_TAX, 0);
    e.statement(BPF_LD | BPF_W | BPF_LEN, 0);
    e.expect_at_least_x();
    e.statement(BPF_LDX | BPF_B | BPF_MSH, ip_offset);
    if (rule.source_port) {
      e.statement(BPF_LD | BPF_H | BPF_IND, ip_offset);
      e.expect_equal(*rule.source_port);
    }
    if (rule.destination_port) {
      e.statement(BPF_LD | BPF_H | BPF_IND, ip_offset + 2);
      e.expect_equal(*rule.destination_port);
    }
  }
  e.accept(snap_length);
}

} // namespace

std::vector<sock_filter> compile_flow_filter(std::span<const flow_rule> rules,
                                             std::uint32_t snap_length) {
  std::vector<sock_filter> program;
  program.reserve(rules.size() * max_bpf_instructions_per_rule + 1);
  for (const auto& rule : rules)
    emit_rule(program, rule, snap_length);
  program.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
  return program;
}

std::vector<sock_filter> reject_all_filter() {
  return {BPF_STMT(BPF_RET | BPF_K, 0)};
}

} // namespace asio_rdma::detail
