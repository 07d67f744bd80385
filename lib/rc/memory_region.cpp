// asio_rdma::memory_region and the remote_buffer encoding.
#include "internal_access.hpp"
#include "rc/connection_impl.hpp"
#include "throw_if.hpp"
#include "verbs/verbs_error.hpp"

#include <asio_rdma/memory_region.hpp>
#include <asio_rdma/remote_buffer.hpp>

#include <boost/endian/conversion.hpp>

#include <cstdlib>
#include <cstring>

namespace asio_rdma {

// ---------------------------------------------------------------- remote_buffer

std::array<std::byte, remote_buffer::encoded_size> remote_buffer::encode() const noexcept {
  std::array<std::byte, encoded_size> out{};
  out[0] = std::byte{encoding_version};
  const std::uint32_t k = boost::endian::native_to_big(rkey);
  const std::uint64_t a = boost::endian::native_to_big(address);
  const std::uint64_t l = boost::endian::native_to_big(length);
  std::memcpy(out.data() + 4, &k, 4);
  std::memcpy(out.data() + 8, &a, 8);
  std::memcpy(out.data() + 16, &l, 8);
  return out;
}

remote_buffer remote_buffer::decode(std::span<const std::byte> bytes, error_code& ec) noexcept {
  if (bytes.size() < encoded_size || bytes[0] != std::byte{encoding_version} ||
      bytes[1] != std::byte{0} || bytes[2] != std::byte{0} || bytes[3] != std::byte{0}) {
    ec = errc::protocol_error;
    return {};
  }
  std::uint32_t k;
  std::uint64_t a, l;
  std::memcpy(&k, bytes.data() + 4, 4);
  std::memcpy(&a, bytes.data() + 8, 8);
  std::memcpy(&l, bytes.data() + 16, 8);
  ec = {};
  return {boost::endian::big_to_native(a), boost::endian::big_to_native(k),
          boost::endian::big_to_native(l)};
}

// ---------------------------------------------------------------- memory_region

// memory_region.hpp spells the flags out so that it need not include verbs.h.
static_assert(static_cast<int>(access::local_write) == IBV_ACCESS_LOCAL_WRITE);
static_assert(static_cast<int>(access::remote_write) == IBV_ACCESS_REMOTE_WRITE);
static_assert(static_cast<int>(access::remote_read) == IBV_ACCESS_REMOTE_READ);
static_assert(static_cast<int>(access::remote_atomic) == IBV_ACCESS_REMOTE_ATOMIC);

namespace {

// Clears `ec` first: a caller's error_code may hold an earlier failure, and the
// constructors go on only while it is clear.
std::shared_ptr<void> pd_of(const connection& conn, ibv_pd*& pd, error_code& ec) {
  ec.clear();
  const auto& impl = detail::internal_access::impl(conn);
  pd = impl ? impl->pd() : nullptr;
  if (!pd) {
    ec = boost::asio::error::not_connected;
    return nullptr;
  }
  return impl->device_handle();
}


} // namespace

memory_region::memory_region() noexcept = default;

memory_region::memory_region(const connection& conn, std::span<std::byte> buffer, access flags) {
  error_code ec;
  *this = memory_region(conn, buffer, flags, ec);
  detail::throw_if(ec, "asio_rdma::memory_region");
}

memory_region::memory_region(const connection& conn, std::span<std::byte> buffer, access flags,
                             error_code& ec) {
  ibv_pd* pd = nullptr;
  pd_owner_ = pd_of(conn, pd, ec);
  if (!ec)
    init(pd, buffer.data(), buffer.size(), false, flags, ec);
}

memory_region::memory_region(const connection& conn, std::size_t size, access flags) {
  error_code ec;
  *this = memory_region(conn, size, flags, ec);
  detail::throw_if(ec, "asio_rdma::memory_region");
}

memory_region::memory_region(const connection& conn, std::size_t size, access flags,
                             error_code& ec) {
  ibv_pd* pd = nullptr;
  pd_owner_ = pd_of(conn, pd, ec);
  if (ec)
    return;
  *this = memory_region(pd, size, flags, ec);
  if (!ec)
    pd_owner_ = pd_of(conn, pd, ec);
}

memory_region::memory_region(ibv_pd* pd, std::span<std::byte> buffer, access flags,
                             error_code& ec) {
  init(pd, buffer.data(), buffer.size(), false, flags, ec);
}

memory_region::memory_region(ibv_pd* pd, std::size_t size, access flags, error_code& ec) {
  const std::size_t page = 4096;
  const std::size_t bytes = (std::max<std::size_t>(size, 1) + page - 1) / page * page;
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(page, bytes));
  if (!memory) {
    ec = boost::asio::error::no_memory;
    return;
  }
  std::memset(memory, 0, bytes);
  init(pd, memory, size, true, flags, ec);
  if (ec && !owned_)
    std::free(memory);
}

void memory_region::init(ibv_pd* pd, std::byte* data, std::size_t size, bool owned,
                         access flags, error_code& ec) {
  if (!pd) {
    ec = boost::asio::error::invalid_argument;
    return;
  }
  // Remote write and atomics require local write (verbs rule); add it rather
  // than fail, since the user clearly wants the peer to write.
  int verbs_flags = static_cast<int>(flags);
  if (verbs_flags & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC))
    verbs_flags |= IBV_ACCESS_LOCAL_WRITE;
  mr_ = ::ibv_reg_mr(pd, data, std::max<std::size_t>(size, 1), verbs_flags);
  if (!mr_) {
    ec = detail::from_errno();
    return;
  }
  data_ = data;
  size_ = size;
  owned_ = owned;
  flags_ = static_cast<access>(verbs_flags);
  ec = {};
}

memory_region::memory_region(memory_region&& other) noexcept
    : pd_owner_(std::move(other.pd_owner_)), mr_(std::exchange(other.mr_, nullptr)),
      data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      owned_(std::exchange(other.owned_, false)), flags_(other.flags_) {}

memory_region& memory_region::operator=(memory_region&& other) noexcept {
  if (this != &other) {
    reset();
    mr_ = std::exchange(other.mr_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owned_ = std::exchange(other.owned_, false);
    flags_ = other.flags_;
    pd_owner_ = std::move(other.pd_owner_); // after the old region is deregistered
  }
  return *this;
}

memory_region::~memory_region() { reset(); }

void memory_region::reset() noexcept {
  if (mr_)
    ::ibv_dereg_mr(mr_); // deregister before freeing
  if (owned_)
    std::free(data_);
  mr_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  owned_ = false;
  pd_owner_.reset();
}

std::uint32_t memory_region::lkey() const noexcept { return mr_ ? mr_->lkey : 0; }
std::uint32_t memory_region::rkey() const noexcept { return mr_ ? mr_->rkey : 0; }

local_buffer memory_region::slice(std::size_t offset, std::size_t length) const noexcept {
  if (length == npos && offset <= size_)
    length = size_ - offset;
  if (offset > size_ || length > size_ - offset || length > 0xffffffffu)
    return {nullptr, 0, 0, false};
  return {data_ + offset, static_cast<std::uint32_t>(length), lkey(), true};
}

remote_buffer memory_region::remote(std::size_t offset, std::size_t length) const noexcept {
  return remote_buffer{reinterpret_cast<std::uintptr_t>(data_), rkey(), size_}.slice(
      offset, length == npos ? (offset <= size_ ? size_ - offset : 0) : length);
}

} // namespace asio_rdma
