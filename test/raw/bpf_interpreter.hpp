// A classic BPF interpreter for the instructions compile_flow_filter emits, with the kernel's
// rules: an out-of-bounds load rejects the frame; SKF_AD_VLAN_TAG[_PRESENT] read the frame's
// VLAN metadata. Test-only.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace raw_test {

/// A frame as an AF_PACKET socket sees it: the 802.1Q tag moved into metadata.
struct kernel_frame {
  std::vector<std::uint8_t> data;
  std::optional<std::uint16_t> vlan_tci;
};

inline std::uint32_t run_bpf(std::span<const sock_filter> program, const kernel_frame& frame) {
  std::uint32_t a = 0, x = 0, scratch[BPF_MEMWORDS] = {};
  const auto& d = frame.data;
  auto load = [&](std::uint32_t offset, std::uint32_t size, std::uint32_t& out) {
    if (offset >= static_cast<std::uint32_t>(SKF_AD_OFF)) {
      const std::uint32_t ad = offset - static_cast<std::uint32_t>(SKF_AD_OFF);
      if (ad == SKF_AD_VLAN_TAG_PRESENT) {
        out = frame.vlan_tci.has_value();
        return true;
      }
      if (ad == SKF_AD_VLAN_TAG) {
        out = frame.vlan_tci.value_or(0);
        return true;
      }
      throw std::logic_error("unsupported ancillary load");
    }
    if (offset + size > d.size() || offset + size < offset)
      return false;
    out = 0;
    for (std::uint32_t i = 0; i < size; ++i)
      out = out << 8 | d[offset + i];
    return true;
  };
  for (std::size_t pc = 0; pc < program.size(); ++pc) {
    const sock_filter& f = program[pc];
    const std::uint32_t size = BPF_SIZE(f.code) == BPF_W ? 4 : BPF_SIZE(f.code) == BPF_H ? 2 : 1;
    switch (BPF_CLASS(f.code)) {
    case BPF_LD:
      switch (BPF_MODE(f.code)) {
      case BPF_ABS:
        if (!load(f.k, size, a))
          return 0;
        break;
      case BPF_IND:
        if (!load(x + f.k, size, a))
          return 0;
        break;
      case BPF_LEN:
        a = static_cast<std::uint32_t>(d.size());
        break;
      case BPF_IMM:
        a = f.k;
        break;
      case BPF_MEM:
        a = scratch[f.k];
        break;
      default:
        throw std::logic_error("unsupported LD mode");
      }
      break;
    case BPF_LDX:
      if (BPF_MODE(f.code) == BPF_MSH) {
        if (f.k >= d.size())
          return 0;
        x = 4u * (d[f.k] & 0xfu);
      } else if (BPF_MODE(f.code) == BPF_IMM) {
        x = f.k;
      } else {
        throw std::logic_error("unsupported LDX mode");
      }
      break;
    case BPF_ST:
      scratch[f.k] = a;
      break;
    case BPF_ALU: {
      const std::uint32_t operand = BPF_SRC(f.code) == BPF_X ? x : f.k;
      switch (BPF_OP(f.code)) {
      case BPF_ADD:
        a += operand;
        break;
      case BPF_AND:
        a &= operand;
        break;
      case BPF_OR:
        a |= operand;
        break;
      default:
        throw std::logic_error("unsupported ALU op");
      }
      break;
    }
    case BPF_JMP: {
      if (BPF_OP(f.code) == BPF_JA) {
        pc += f.k;
        break;
      }
      const std::uint32_t operand = BPF_SRC(f.code) == BPF_X ? x : f.k;
      bool taken = false;
      switch (BPF_OP(f.code)) {
      case BPF_JEQ:
        taken = a == operand;
        break;
      case BPF_JGE:
        taken = a >= operand;
        break;
      case BPF_JGT:
        taken = a > operand;
        break;
      case BPF_JSET:
        taken = (a & operand) != 0;
        break;
      default:
        throw std::logic_error("unsupported JMP op");
      }
      pc += taken ? f.jt : f.jf;
      break;
    }
    case BPF_RET:
      return BPF_RVAL(f.code) == BPF_A ? a : f.k;
    case BPF_MISC:
      if (BPF_MISCOP(f.code) == BPF_TAX)
        x = a;
      else
        a = x;
      break;
    default:
      throw std::logic_error("unsupported class");
    }
  }
  throw std::logic_error("program fell off its end");
}

} // namespace raw_test
