// Fuzzes the file transfer's control-message decoder (every message a
// file_receiver or a sender reads from its peer) and the check of the names
// it carries. Invariants: a decoded message encodes back to exactly the input
// bytes; a refused one is errc::protocol_error and monostate; an accepted
// name's components join back to the name and none can leave the directory;
// CRC-32C computed in two pieces equals the one-piece value. Version 2's
// resume messages: a file_begin carries no flag but flag_resume (and none on
// a directory), a resume_point for an empty prefix has the CRC of nothing
// (0), and every message of another version is refused. A file_batch's
// records, rebuilt with batch_builder as the sender builds them, give back
// exactly the input bytes; each record lies inside the input, and a
// directory's carries no data and no checksum.
#include "fuzz_check.hpp"

#include "../../lib/file_transfer/file_name.hpp"
#include "../../lib/file_transfer/protocol.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

namespace fp = asio_rdma::detail::file_protocol;

namespace {

void check_name(std::string_view name) {
  asio_rdma::error_code ec;
  const auto components = asio_rdma::detail::split_relative_name(name, ec);
  if (ec) {
    FUZZ_CHECK(ec == asio_rdma::errc::protocol_error);
    FUZZ_CHECK(components.empty());
    return;
  }
  FUZZ_CHECK(!components.empty());
  std::string joined;
  for (const auto& c : components) {
    FUZZ_CHECK(!c.empty() && c != "." && c != "..");
    FUZZ_CHECK(c.size() <= asio_rdma::detail::max_name_component);
    FUZZ_CHECK(c.find('/') == std::string::npos && c.find('\0') == std::string::npos);
    if (!joined.empty())
      joined += '/';
    joined += c;
  }
  FUZZ_CHECK(joined == name);
}

void check_batch(const fp::file_batch& batch, std::span<const std::byte> in) {
  FUZZ_CHECK(batch.count > 0);
  FUZZ_CHECK(batch.records.data() == in.data() + fp::batch_header_size);
  std::vector<std::byte> out(in.size());
  fp::batch_builder rebuilt(out, batch.first_file_id);
  auto rest = batch.records;
  fp::batch_record r;
  for (std::uint16_t i = 0; i < batch.count; ++i) {
    FUZZ_CHECK(fp::take_record(rest, batch.first_file_id + i, r));
    FUZZ_CHECK(r.entry.file_id == batch.first_file_id + i && r.entry.flags == 0);
    FUZZ_CHECK(r.data.size() == r.entry.size);
    FUZZ_CHECK(r.data.data() >= in.data() &&
               r.data.data() + r.data.size() <= in.data() + in.size());
    if (r.entry.kind == fp::entry_kind::directory)
      FUZZ_CHECK(r.data.empty() && r.crc32c == 0);
    check_name(r.entry.name);
    FUZZ_CHECK(rebuilt.fits(r.entry.name.size(), r.entry.size));
    auto data = rebuilt.add(r.entry.kind, r.entry.mode, r.entry.name,
                            static_cast<std::uint32_t>(r.entry.size));
    std::copy(r.data.begin(), r.data.end(), data.begin());
    rebuilt.set_crc(r.crc32c);
  }
  FUZZ_CHECK(rest.empty());
  FUZZ_CHECK(rebuilt.finish() == in.size());
  FUZZ_CHECK(std::equal(out.begin(), out.end(), in.begin()));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);

  asio_rdma::error_code ec;
  const fp::message m = fp::decode(in, ec);
  if (ec) {
    FUZZ_CHECK(ec == asio_rdma::errc::protocol_error);
    FUZZ_CHECK(std::holds_alternative<std::monostate>(m));
  } else if (const auto* batch = std::get_if<fp::file_batch>(&m)) {
    check_batch(*batch, in);
  } else {
    FUZZ_CHECK(!std::holds_alternative<std::monostate>(m));
    static std::array<std::byte, fp::max_message_size> out;
    const std::size_t n = fp::encode(m, out);
    FUZZ_CHECK(n == size);
    FUZZ_CHECK(std::equal(out.begin(), out.begin() + n, in.begin()));
    // A buffer one byte short is refused, never overrun.
    FUZZ_CHECK(fp::encode(m, std::span(out.data(), n - 1)) == 0);
    FUZZ_CHECK(size > 4 && std::to_integer<std::uint8_t>(in[4]) == fp::version);
    if (const auto* begin = std::get_if<fp::file_begin>(&m)) {
      FUZZ_CHECK(!begin->name.empty() && begin->name.size() <= fp::max_name_length);
      FUZZ_CHECK((begin->flags & ~fp::flag_resume) == 0);
      FUZZ_CHECK(begin->kind == fp::entry_kind::file || begin->flags == 0);
      check_name(begin->name);
    }
    if (const auto* point = std::get_if<fp::resume_point>(&m))
      FUZZ_CHECK(point->offset != 0 || point->crc32c == 0);
  }

  // Names straight from the input, as a sender's file_begin could carry them.
  check_name(std::string_view(reinterpret_cast<const char*>(data), size));

  const std::size_t half = size / 2;
  const std::uint32_t whole = fp::crc32c(0, in);
  FUZZ_CHECK(fp::crc32c(fp::crc32c(0, in.first(half)), in.subspan(half)) == whole);
  return 0;
}
