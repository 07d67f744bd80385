// Encoding and decoding of the file transfer's control messages (version 4).
#include "protocol.hpp"

#include <boost/endian/conversion.hpp>

#include <array>
#include <cstring>
#include <limits>
#include <type_traits>

namespace asio_rdma::detail::file_protocol {

namespace {

class writer {
public:
  explicit writer(std::span<std::byte> out) noexcept : out_(out) {}

  template <typename T> void put(T value) noexcept {
    static_assert(std::is_unsigned_v<T>);
    if (!fits(sizeof(T)))
      return;
    boost::endian::endian_store<T, sizeof(T), boost::endian::order::big>(
        reinterpret_cast<unsigned char*>(out_.data() + pos_), value);
    pos_ += sizeof(T);
  }
  void put(std::string_view bytes) noexcept {
    if (!fits(bytes.size()))
      return;
    std::memcpy(out_.data() + pos_, bytes.data(), bytes.size());
    pos_ += bytes.size();
  }
  void header(message_type type) noexcept {
    put(magic);
    put(version);
    put(static_cast<std::uint8_t>(type));
    put(std::uint16_t(0));
  }
  /// Bytes written, 0 if anything did not fit.
  std::size_t size() const noexcept { return overflow_ ? 0 : pos_; }

private:
  bool fits(std::size_t n) noexcept {
    if (out_.size() - pos_ < n)
      overflow_ = true;
    return !overflow_;
  }
  std::span<std::byte> out_;
  std::size_t pos_ = 0;
  bool overflow_ = false;
};

class reader {
public:
  explicit reader(std::span<const std::byte> in) noexcept : in_(in) {}

  template <typename T> T get() noexcept {
    T value = 0;
    if (in_.size() - pos_ < sizeof(T)) {
      pos_ = in_.size();
      return value;
    }
    value = boost::endian::endian_load<T, sizeof(T), boost::endian::order::big>(
        reinterpret_cast<const unsigned char*>(in_.data() + pos_));
    pos_ += sizeof(T);
    return value;
  }
  std::string_view rest() const noexcept {
    return {reinterpret_cast<const char*>(in_.data()) + pos_, in_.size() - pos_};
  }

private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

constexpr std::size_t fixed_size(message_type t) noexcept {
  switch (t) {
  case message_type::hello:
    return 16;
  case message_type::hello_ack:
    return 40;
  case message_type::file_begin:
    return 28;
  case message_type::file_end:
    return 24;
  case message_type::credit:
  case message_type::chunk_written:
    return 16;
  case message_type::status:
    return 24;
  case message_type::challenge:
  case message_type::proof:
    return header_size + 32;
  case message_type::resume_point:
  case message_type::resume_from:
    return 24;
  case message_type::file_batch:
    return batch_header_size;
  }
  return 0;
}

struct encoder {
  writer& w;
  bool ok = true;
  void operator()(std::monostate) noexcept { ok = false; }
  void operator()(const hello& m) noexcept {
    w.header(message_type::hello);
    w.put(m.chunk_size);
    w.put(m.depth);
    w.put(m.flags);
  }
  void operator()(const hello_ack& m) noexcept {
    w.header(message_type::hello_ack);
    w.put(m.chunk_size);
    w.put(m.slots);
    w.put(std::uint16_t(0));
    w.put(m.buffer.address);
    w.put(m.buffer.rkey);
    w.put(m.batch_limit);
    w.put(m.buffer.length);
  }
  void operator()(const file_begin& m) noexcept {
    if (m.name.empty() || m.name.size() > max_name_length) {
      ok = false;
      return;
    }
    w.header(message_type::file_begin);
    w.put(m.file_id);
    w.put(static_cast<std::uint8_t>(m.kind));
    w.put(m.flags);
    w.put(static_cast<std::uint16_t>(m.name.size()));
    w.put(m.mode);
    w.put(m.size);
    w.put(m.name);
  }
  void operator()(const file_end& m) noexcept {
    w.header(message_type::file_end);
    w.put(m.file_id);
    w.put(m.crc32c);
    w.put(m.size);
  }
  void operator()(const chunk_written& m) noexcept {
    w.header(message_type::chunk_written);
    w.put(m.sequence);
    w.put(m.length);
  }
  void operator()(const credit& m) noexcept {
    w.header(message_type::credit);
    w.put(m.sequence);
    w.put(std::uint32_t(0));
  }
  void operator()(const status& m) noexcept {
    w.header(message_type::status);
    w.put(m.file_id);
    w.put(static_cast<std::uint16_t>(m.code));
    w.put(std::uint16_t(0));
    w.put(m.credited);
    w.put(std::uint32_t(0));
  }
  void operator()(const challenge& m) noexcept {
    w.header(message_type::challenge);
    w.put(as_text(m.nonce));
  }
  void operator()(const proof& m) noexcept {
    w.header(message_type::proof);
    w.put(as_text(m.mac));
  }
  void operator()(const resume_point& m) noexcept {
    w.header(message_type::resume_point);
    w.put(m.file_id);
    w.put(m.crc32c);
    w.put(m.offset);
  }
  void operator()(const resume_from& m) noexcept {
    w.header(message_type::resume_from);
    w.put(m.file_id);
    w.put(std::uint32_t(0));
    w.put(m.offset);
  }
  void operator()(const file_batch&) noexcept { ok = false; } // batch_builder builds them
  template <std::size_t N> static std::string_view as_text(const std::array<std::byte, N>& a) {
    return {reinterpret_cast<const char*>(a.data()), N};
  }
};

message fail(error_code& ec) noexcept {
  ec = errc::protocol_error;
  return std::monostate{};
}

} // namespace

std::size_t encode(const message& m, std::span<std::byte> out) noexcept {
  writer w(out);
  encoder e{w};
  std::visit(e, m);
  return e.ok ? w.size() : 0;
}

message decode(std::span<const std::byte> in, error_code& ec) noexcept {
  ec = {};
  if (in.size() < header_size)
    return fail(ec);
  reader r(in);
  if (r.get<std::uint32_t>() != magic || r.get<std::uint8_t>() != version)
    return fail(ec);
  auto type = static_cast<message_type>(r.get<std::uint8_t>());
  if (r.get<std::uint16_t>() != 0)
    return fail(ec);
  std::size_t fixed = fixed_size(type);
  if (fixed == 0 || in.size() < fixed)
    return fail(ec);
  if (type != message_type::file_begin && type != message_type::file_batch && in.size() != fixed)
    return fail(ec);

  switch (type) {
  case message_type::hello: {
    hello m;
    m.chunk_size = r.get<std::uint32_t>();
    m.depth = r.get<std::uint16_t>();
    m.flags = r.get<std::uint16_t>();
    if ((m.flags & ~hello_chunk_notices) != 0)
      return fail(ec);
    return m;
  }
  case message_type::hello_ack: {
    hello_ack m;
    m.chunk_size = r.get<std::uint32_t>();
    m.slots = r.get<std::uint16_t>();
    if (r.get<std::uint16_t>() != 0)
      return fail(ec);
    m.buffer.address = r.get<std::uint64_t>();
    m.buffer.rkey = r.get<std::uint32_t>();
    m.batch_limit = r.get<std::uint32_t>();
    m.buffer.length = r.get<std::uint64_t>();
    return m;
  }
  case message_type::file_begin: {
    file_begin m;
    m.file_id = r.get<std::uint32_t>();
    auto kind = r.get<std::uint8_t>();
    m.flags = r.get<std::uint8_t>();
    if ((m.flags & ~flag_resume) != 0)
      return fail(ec);
    if (kind != static_cast<std::uint8_t>(entry_kind::file) &&
        kind != static_cast<std::uint8_t>(entry_kind::directory))
      return fail(ec);
    m.kind = static_cast<entry_kind>(kind);
    std::size_t name_length = r.get<std::uint16_t>();
    m.mode = r.get<std::uint32_t>();
    m.size = r.get<std::uint64_t>();
    if (name_length == 0 || name_length > max_name_length || in.size() != fixed + name_length)
      return fail(ec);
    if (m.mode > 07777 || (m.kind == entry_kind::directory && (m.size != 0 || m.flags != 0)))
      return fail(ec);
    m.name = r.rest();
    return m;
  }
  case message_type::file_end: {
    file_end m;
    m.file_id = r.get<std::uint32_t>();
    m.crc32c = r.get<std::uint32_t>();
    m.size = r.get<std::uint64_t>();
    return m;
  }
  case message_type::chunk_written: {
    chunk_written m;
    m.sequence = r.get<std::uint32_t>();
    m.length = r.get<std::uint32_t>();
    return m;
  }
  case message_type::credit: {
    credit m;
    m.sequence = r.get<std::uint32_t>();
    if (r.get<std::uint32_t>() != 0)
      return fail(ec);
    return m;
  }
  case message_type::status: {
    status m;
    m.file_id = r.get<std::uint32_t>();
    m.code = static_cast<status_code>(r.get<std::uint16_t>());
    if (r.get<std::uint16_t>() != 0)
      return fail(ec);
    m.credited = r.get<std::uint32_t>();
    if (r.get<std::uint32_t>() != 0)
      return fail(ec);
    return m;
  }
  case message_type::challenge: {
    challenge m;
    std::memcpy(m.nonce.data(), r.rest().data(), m.nonce.size());
    return m;
  }
  case message_type::proof: {
    proof m;
    std::memcpy(m.mac.data(), r.rest().data(), m.mac.size());
    return m;
  }
  case message_type::resume_point: {
    resume_point m;
    m.file_id = r.get<std::uint32_t>();
    m.crc32c = r.get<std::uint32_t>();
    m.offset = r.get<std::uint64_t>();
    if (m.offset == 0 && m.crc32c != 0) // the CRC-32C of nothing is 0
      return fail(ec);
    return m;
  }
  case message_type::resume_from: {
    resume_from m;
    m.file_id = r.get<std::uint32_t>();
    if (r.get<std::uint32_t>() != 0)
      return fail(ec);
    m.offset = r.get<std::uint64_t>();
    return m;
  }
  case message_type::file_batch: {
    file_batch m;
    m.first_file_id = r.get<std::uint32_t>();
    m.count = r.get<std::uint16_t>();
    if (r.get<std::uint16_t>() != 0 || m.count == 0)
      return fail(ec);
    m.records = in.subspan(batch_header_size);
    // Every record whole, and nothing after the last.
    auto rest = m.records;
    batch_record record;
    for (std::uint16_t i = 0; i < m.count; ++i)
      if (!take_record(rest, m.first_file_id + i, record))
        return fail(ec);
    if (!rest.empty())
      return fail(ec);
    return m;
  }
  }
  return fail(ec);
}

bool take_record(std::span<const std::byte>& records, std::uint32_t file_id,
                 batch_record& out) noexcept {
  if (records.size() < record_header_size)
    return false;
  reader r(records.first(record_header_size));
  auto kind = r.get<std::uint8_t>();
  auto flags = r.get<std::uint8_t>();
  std::size_t name_length = r.get<std::uint16_t>();
  auto mode = r.get<std::uint32_t>();
  std::uint64_t size = r.get<std::uint32_t>();
  auto crc = r.get<std::uint32_t>();
  if (flags != 0 || mode > 07777 || name_length == 0 || name_length > max_name_length)
    return false;
  if (kind != static_cast<std::uint8_t>(entry_kind::file) &&
      (kind != static_cast<std::uint8_t>(entry_kind::directory) || size != 0 || crc != 0))
    return false;
  if (records.size() - record_header_size < name_length + size)
    return false;
  out.entry = file_begin{};
  out.entry.file_id = file_id;
  out.entry.kind = static_cast<entry_kind>(kind);
  out.entry.mode = mode;
  out.entry.size = size;
  out.entry.name = std::string_view(
      reinterpret_cast<const char*>(records.data()) + record_header_size, name_length);
  out.crc32c = crc;
  out.data = records.subspan(record_header_size + name_length, size);
  records = records.subspan(record_header_size + name_length + size);
  return true;
}

batch_builder::batch_builder(std::span<std::byte> out, std::uint32_t first_file_id) noexcept
    : out_(out), first_(first_file_id) {}

bool batch_builder::fits(std::size_t name_length, std::uint64_t size) const noexcept {
  return count_ < std::numeric_limits<std::uint16_t>::max() && name_length > 0 &&
         name_length <= max_name_length && size <= std::numeric_limits<std::uint32_t>::max() &&
         out_.size() >= used_ && out_.size() - used_ >= record_size(name_length, size);
}

std::span<std::byte> batch_builder::add(entry_kind kind, std::uint32_t mode, std::string_view name,
                                        std::uint32_t size) noexcept {
  writer w(out_.subspan(used_, record_header_size + name.size()));
  w.put(static_cast<std::uint8_t>(kind));
  w.put(std::uint8_t(0));
  w.put(static_cast<std::uint16_t>(name.size()));
  w.put(mode);
  w.put(size);
  last_crc_at_ = used_ + 12;
  w.put(std::uint32_t(0)); // set_crc()
  w.put(name);
  used_ += record_header_size + name.size();
  auto data = out_.subspan(used_, size);
  used_ += size;
  ++count_;
  return data;
}

void batch_builder::set_crc(std::uint32_t crc) noexcept {
  writer w(out_.subspan(last_crc_at_, 4));
  w.put(crc);
}

std::size_t batch_builder::finish() noexcept {
  writer w(out_.first(batch_header_size));
  w.header(message_type::file_batch);
  w.put(first_);
  w.put(count_);
  w.put(std::uint16_t(0));
  return used_;
}

} // namespace asio_rdma::detail::file_protocol
