// asio-rdma: registered memory, for zero-copy sends and one-sided operations.
#pragma once

#include <asio_rdma/error.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>

struct ibv_mr;
struct ibv_pd;

namespace asio_rdma {

class connection;

/// What a memory region allows (combine with |). Local read is always allowed.
/// The values are the IBV_ACCESS_* flags of the same names.
enum class access : int {
  none = 0,
  local_write = 1,   // IBV_ACCESS_LOCAL_WRITE
  remote_write = 2,  // IBV_ACCESS_REMOTE_WRITE
  remote_read = 4,   // IBV_ACCESS_REMOTE_READ
  remote_atomic = 8, // IBV_ACCESS_REMOTE_ATOMIC
  /// Everything: local write, remote read, write and atomics.
  all = local_write | remote_write | remote_read | remote_atomic,
};
constexpr access operator|(access a, access b) noexcept {
  return static_cast<access>(static_cast<int>(a) | static_cast<int>(b));
}
constexpr bool has(access set, access flag) noexcept {
  return (static_cast<int>(set) & static_cast<int>(flag)) == static_cast<int>(flag);
}

/// A contiguous part of a memory_region: the local side of a zero-copy send,
/// an RDMA read/write or a scatter/gather entry. Made by memory_region::slice,
/// which checks the bounds; an out-of-bounds slice is remembered, and any
/// operation given it fails with errc::out_of_bounds before posting.
struct local_buffer {
  /// First byte (inside a registered region).
  std::byte* data = nullptr;
  /// Length in bytes.
  std::uint32_t length = 0;
  /// The region's local key.
  std::uint32_t lkey = 0;
  /// False if the slice it was made from was out of bounds.
  bool in_bounds = true;
};

/// Memory registered with the protection domain of a connection's device
/// (shared by every connection on that device, so one region serves them
/// all). Move-only; deregisters in its destructor (and frees the memory if it
/// allocated it). The memory must not be freed, and the region must not be
/// destroyed, while an operation that uses it is in flight.
///
/// Registration is a system call that pins memory: register once, reuse for
/// many operations (see also buffer_pool).
class memory_region {
public:
  memory_region() noexcept;
  /// Registers existing memory `buffer` (libiwarp's iw_lmr_register).
  /// Throws boost::system::system_error.
  memory_region(const connection& conn, std::span<std::byte> buffer, access flags);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  memory_region(const connection& conn, std::span<std::byte> buffer, access flags,
                error_code& ec);
  /// Allocates `size` zeroed, page-aligned bytes and registers them
  /// (libiwarp's iw_lmr_create). Throws boost::system::system_error.
  memory_region(const connection& conn, std::size_t size, access flags);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  memory_region(const connection& conn, std::size_t size, access flags, error_code& ec);
  /// The same, on an explicit protection domain (e.g. from a connection's
  /// native_protection_domain(), or your own verbs code). `pd` must outlive
  /// the region.
  memory_region(ibv_pd* pd, std::span<std::byte> buffer, access flags, error_code& ec);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  memory_region(ibv_pd* pd, std::size_t size, access flags, error_code& ec);

  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  memory_region(memory_region&&) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  memory_region& operator=(memory_region&&) noexcept;
  ~memory_region();

  /// True if the region holds registered memory (not default-constructed or moved from).
  bool is_registered() const noexcept { return mr_ != nullptr; }
  /// The registered bytes.
  std::span<std::byte> data() const noexcept { return {data_, size_}; }
  /// Their number.
  std::size_t size() const noexcept { return size_; }
  /// The access it was registered with.
  access flags() const noexcept { return flags_; }
  /// The local key (for local_buffer).
  std::uint32_t lkey() const noexcept;
  /// The remote key the peer needs (see remote()).
  std::uint32_t rkey() const noexcept;
  /// The verbs memory region (owned by this object).
  ibv_mr* native_handle() const noexcept { return mr_; }

  /// As a length: up to the end of the region.
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  /// [offset, offset + length) of the region as a local buffer (length npos:
  /// to the end). Bounds are checked: see local_buffer.
  local_buffer slice(std::size_t offset = 0, std::size_t length = npos) const noexcept;

  /// [offset, offset + length) as the peer addresses it (to advertise).
  remote_buffer remote(std::size_t offset = 0, std::size_t length = npos) const noexcept;

private:
  void init(ibv_pd* pd, std::byte* data, std::size_t size, bool owned, access flags,
            error_code& ec);
  void reset() noexcept;

  std::shared_ptr<void> pd_owner_; // keeps the protection domain alive
  ibv_mr* mr_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool owned_ = false;
  access flags_ = access::none;
};

} // namespace asio_rdma
