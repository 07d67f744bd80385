// The file transfer's wire format and name checks: pure functions, no device.
#define BOOST_TEST_MODULE file_protocol
#include <boost/test/unit_test.hpp>

#include "../../lib/file_transfer/file_name.hpp"
#include "../../lib/file_transfer/protocol.hpp"
#include <asio_rdma/file_transfer.hpp>

#include <array>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace ar = asio_rdma;
namespace proto = asio_rdma::detail::file_protocol;

namespace {

std::vector<std::byte> encoded(const proto::message& m) {
  std::vector<std::byte> out(proto::max_message_size);
  out.resize(proto::encode(m, out));
  return out;
}

/// Encodes and decodes `m`; true if the same message comes back (checked
/// while the bytes a file_begin's name views are alive).
template <typename T> bool round_trip(const T& m) {
  auto bytes = encoded(m);
  BOOST_REQUIRE(!bytes.empty());
  ar::error_code ec;
  auto back = proto::decode(bytes, ec);
  BOOST_REQUIRE(!ec);
  BOOST_REQUIRE(std::holds_alternative<T>(back));
  return std::get<T>(back) == m;
}

/// `bytes` decode to nothing but a protocol error.
void check_refused(const std::vector<std::byte>& bytes, const char* what) {
  ar::error_code ec;
  auto m = proto::decode(bytes, ec);
  BOOST_TEST((ec == ar::errc::protocol_error), what);
  BOOST_TEST(std::holds_alternative<std::monostate>(m), what);
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

} // namespace

BOOST_AUTO_TEST_CASE(every_message_round_trips) {
  proto::hello h{1 << 20, 8};
  BOOST_TEST(round_trip(h));
  proto::hello_ack a{65536, 4, ar::remote_buffer{0x1122334455667788ull, 0xabcdef01u, 262144},
                     65536};
  BOOST_TEST(round_trip(a));
  std::string name = "dir/sub/file.bin";
  proto::file_begin b{7, proto::entry_kind::file, 0644, 123456789012ull, name};
  BOOST_TEST(round_trip(b));
  proto::file_begin d{8, proto::entry_kind::directory, 0755, 0, "dir"};
  BOOST_TEST(round_trip(d));
  proto::file_end e{7, 0xdeadbeefu, 123456789012ull};
  BOOST_TEST(round_trip(e));
  proto::credit c{0xfffffffeu};
  BOOST_TEST(round_trip(c));
  proto::hello notices{1 << 20, 8, proto::hello_chunk_notices};
  BOOST_TEST(round_trip(notices));
  proto::chunk_written w{0xfffffffdu, 65536};
  BOOST_TEST(round_trip(w));
  proto::status s{9, proto::status_code::checksum_mismatch};
  BOOST_TEST(round_trip(s));
  proto::status credited{9, proto::status_code::ok, 0xfffffff0u};
  BOOST_TEST(round_trip(credited));
  proto::file_begin r{9, proto::entry_kind::file, 0644, 100, name, proto::flag_resume};
  BOOST_TEST(round_trip(r));
  proto::resume_point p{9, 0x12345678u, 65536};
  BOOST_TEST(round_trip(p));
  proto::resume_point nothing{9, 0, 0};
  BOOST_TEST(round_trip(nothing));
  proto::resume_from f{9, 65536};
  BOOST_TEST(round_trip(f));
}

BOOST_AUTO_TEST_CASE(layout_is_fixed_and_in_network_byte_order) {
  auto bytes = encoded(proto::hello{0x01020304u, 0x0506});
  BOOST_TEST(bytes.size() == 16u);
  const unsigned char expected[16] = {'R', 'D', 'F', 'T', 4, 1, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0};
  BOOST_TEST(std::memcmp(bytes.data(), expected, 16) == 0);
  BOOST_TEST(encoded(proto::hello_ack{}).size() == 40u);
  auto ack = encoded(proto::hello_ack{1, 1, ar::remote_buffer{}, 0x01020304u});
  BOOST_TEST(int(ack[28]) == 1); // batch_limit, big-endian, after the rkey
  BOOST_TEST(int(ack[31]) == 4);
  BOOST_TEST(encoded(proto::file_end{}).size() == 24u);
  BOOST_TEST(encoded(proto::credit{}).size() == 16u);
  auto flagged_hello = encoded(proto::hello{1, 1, proto::hello_chunk_notices});
  BOOST_TEST(int(flagged_hello[15]) == 1); // flags, big-endian, after the depth
  auto written = encoded(proto::chunk_written{0x01020304u, 0x05060708u});
  BOOST_TEST(written.size() == 16u);
  BOOST_TEST(int(written[5]) == 12); // type
  BOOST_TEST(int(written[8]) == 1);  // sequence, big-endian
  BOOST_TEST(int(written[15]) == 8); // length, big-endian
  BOOST_TEST(encoded(proto::status{}).size() == 24u);
  auto status = encoded(proto::status{1, proto::status_code::ok, 0x0a0b0c0du});
  BOOST_TEST(int(status[16]) == 0x0a); // credited, big-endian, after the reserved u16
  BOOST_TEST(int(status[19]) == 0x0d);
  BOOST_TEST(encoded(proto::resume_point{}).size() == 24u);
  BOOST_TEST(encoded(proto::resume_from{}).size() == 24u);
  auto resume = encoded(proto::resume_from{1, 0x0102030405060708ull});
  BOOST_TEST(int(resume[5]) == 10); // type
  BOOST_TEST(int(resume[16]) == 1); // offset, big-endian
  BOOST_TEST(int(resume[23]) == 8);
  auto flagged = encoded(proto::file_begin{1, proto::entry_kind::file, 0600, 5, "abc", 1});
  BOOST_TEST(int(flagged[13]) == 1); // flags after the kind
  auto begin = encoded(proto::file_begin{1, proto::entry_kind::file, 0600, 5, "abc"});
  BOOST_TEST(begin.size() == 31u);
  BOOST_TEST(int(begin[14]) == 0); // name length, big-endian
  BOOST_TEST(int(begin[15]) == 3);
  BOOST_TEST(int(begin[27]) == 5); // size, big-endian, last byte
  BOOST_TEST(char(begin[28]) == 'a');
}

BOOST_AUTO_TEST_CASE(malformed_messages_are_protocol_errors) {
  auto good = encoded(proto::credit{3});
  const auto& check = check_refused;
  check({}, "empty");
  check(std::vector<std::byte>(good.begin(), good.begin() + 7), "shorter than a header");
  check(std::vector<std::byte>(good.begin(), good.end() - 1), "truncated");
  auto longer = good;
  longer.push_back(std::byte{0});
  check(longer, "trailing bytes");
  auto bad = good;
  bad[0] = std::byte{'X'};
  check(bad, "wrong magic");
  bad = good;
  bad[4] = std::byte{1};
  check(bad, "version 1 (no resume) is refused");
  bad = good;
  bad[4] = std::byte{2};
  check(bad, "version 2 (a status per file_begin, chunks numbered per file) is refused");
  bad = good;
  bad[4] = std::byte{3};
  check(bad, "version 3 (no file_batch) is refused");
  bad = good;
  bad[4] = std::byte{5};
  check(bad, "unknown version");
  bad = good;
  bad[5] = std::byte{99};
  check(bad, "unknown type");
  bad = good;
  bad[7] = std::byte{1};
  check(bad, "reserved header bytes");
  bad = good;
  bad[15] = std::byte{1};
  check(bad, "reserved payload bytes");
  bad = encoded(proto::hello{1, 1});
  bad[15] = std::byte{2};
  check(bad, "an unknown hello flag");
  bad = encoded(proto::status{1, proto::status_code::ok, 5});
  bad[23] = std::byte{1};
  check(bad, "a status's reserved bytes after credited");

  auto begin = encoded(proto::file_begin{1, proto::entry_kind::file, 0600, 5, "abc"});
  bad = begin;
  bad[15] = std::byte{4}; // name length says 4, 3 bytes follow
  check(bad, "name length mismatch");
  bad = begin;
  bad[12] = std::byte{3};
  check(bad, "unknown entry kind");
  bad = begin;
  bad[17] = std::byte{0x10}; // mode 0x100180 > 07777
  check(bad, "mode out of range");
  auto dir = encoded(proto::file_begin{1, proto::entry_kind::directory, 0755, 0, "d"});
  dir[27] = std::byte{1};
  check(dir, "directory with a size");
  bad = begin;
  bad[13] = std::byte{2};
  check(bad, "unknown file_begin flag");
  auto resumable_dir = encoded(proto::file_begin{1, proto::entry_kind::directory, 0755, 0, "d", 1});
  check(resumable_dir, "resumable directory");
  auto point = encoded(proto::resume_point{1, 7, 0});
  check(point, "a CRC-32C for an empty prefix");
  auto from = encoded(proto::resume_from{1, 5});
  from[13] = std::byte{1};
  check(from, "resume_from's reserved field");
  from = encoded(proto::resume_from{1, 5});
  from.pop_back();
  check(from, "resume_from truncated");
}

BOOST_AUTO_TEST_CASE(encode_refuses_what_it_cannot_represent) {
  std::array<std::byte, 8> small{};
  BOOST_TEST(proto::encode(proto::hello{}, small) == 0u);
  std::vector<std::byte> big(proto::max_message_size + 10);
  std::string too_long(proto::max_name_length + 1, 'a');
  BOOST_TEST(proto::encode(proto::file_begin{1, proto::entry_kind::file, 0, 0, too_long}, big) ==
             0u);
  BOOST_TEST(proto::encode(proto::file_begin{1, proto::entry_kind::file, 0, 0, ""}, big) == 0u);
  std::string longest(proto::max_name_length, 'a');
  BOOST_TEST(proto::encode(proto::file_begin{1, proto::entry_kind::file, 0, 0, longest}, big) ==
             proto::max_message_size);
}

BOOST_AUTO_TEST_CASE(crc32c_matches_the_standard_check_value) {
  std::string check = "123456789";
  BOOST_TEST(proto::crc32c(0, as_bytes(check)) == 0xE3069283u);
  // Incremental == one pass.
  std::string a = "12345", b = "6789";
  BOOST_TEST(proto::crc32c(proto::crc32c(0, as_bytes(a)), as_bytes(b)) == 0xE3069283u);
  BOOST_TEST(proto::crc32c(0, {}) == 0u);
}

namespace {

/// The CRC-32C the file transfer used before ISA-L (bit by bit, reflected
/// polynomial 0x82F63B78): the library's must stay identical to it, or
/// old and new peers would refuse each other's files.
std::uint32_t reference_crc32c(std::uint32_t crc, std::span<const std::byte> data) {
  crc = ~crc;
  for (std::byte b : data) {
    crc ^= std::to_integer<std::uint32_t>(b);
    for (int k = 0; k < 8; ++k)
      crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

} // namespace

BOOST_AUTO_TEST_CASE(crc32c_matches_the_rfc3720_vectors) {
  // RFC 3720 (iSCSI), appendix B.4: 32 bytes each.
  std::array<std::byte, 32> bytes{};
  BOOST_TEST(proto::crc32c(0, bytes) == 0x8A9136AAu); // zeros
  bytes.fill(std::byte{0xff});
  BOOST_TEST(proto::crc32c(0, bytes) == 0x62A8AB43u); // ones
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = std::byte(i);
  BOOST_TEST(proto::crc32c(0, bytes) == 0x46DD794Eu); // incrementing
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = std::byte(31 - i);
  BOOST_TEST(proto::crc32c(0, bytes) == 0x113FDB5Cu); // decrementing
}

BOOST_AUTO_TEST_CASE(crc32c_is_bit_identical_to_the_reference_at_every_length_and_split) {
  std::vector<std::byte> data(70000);
  std::uint32_t x = 12345;
  for (auto& b : data) {
    x = x * 1103515245u + 12345u;
    b = std::byte(x >> 24);
  }
  int mismatches = 0;
  // Every length up to 300 (the vector code's head and tail paths), then
  // larger ones, each also computed in two pieces at an odd split.
  for (std::size_t length = 0; length <= data.size(); length += length < 300 ? 1 : 997) {
    std::span<const std::byte> all(data.data() + length % 7, length - length % 7);
    auto want = reference_crc32c(0, all);
    auto split = all.size() / 3;
    auto two_pieces = proto::crc32c(proto::crc32c(0, all.first(split)), all.subspan(split));
    if (proto::crc32c(0, all) != want || two_pieces != want)
      ++mismatches;
  }
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(relative_names_are_split) {
  ar::error_code ec;
  auto parts = ar::detail::split_relative_name("a/b c/.hidden/file..txt", ec);
  BOOST_TEST(!ec);
  std::vector<std::string> expected = {"a", "b c", ".hidden", "file..txt"};
  BOOST_TEST(parts == expected, boost::test_tools::per_element());
  parts = ar::detail::split_relative_name("plain", ec);
  BOOST_TEST(!ec);
  BOOST_TEST(parts.size() == 1u);
}

BOOST_AUTO_TEST_CASE(names_that_could_escape_are_refused) {
  const char* bad[] = {"",    "/etc/passwd", "..",   "../x", "a/../../x", "a/..",
                       "./a", "a/./b",       "a//b", "a/",   "//x",       "."};
  for (const char* name : bad) {
    ar::error_code ec;
    auto parts = ar::detail::split_relative_name(name, ec);
    BOOST_TEST((ec == ar::errc::protocol_error), "'" << name << "'");
    BOOST_TEST(parts.empty());
  }
  ar::error_code ec;
  std::string with_nul("a\0b", 3);
  ar::detail::split_relative_name(with_nul, ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
  ar::detail::split_relative_name(std::string(ar::detail::max_name_component + 1, 'x'), ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
  ar::detail::split_relative_name(std::string(ar::detail::max_name_component, 'x'), ec);
  BOOST_TEST(!ec);
}

BOOST_AUTO_TEST_CASE(options_name_the_bad_field) {
  ar::file_transfer_options o;
  BOOST_TEST(o.problem() == nullptr);
  o.buffer_size = 100;
  BOOST_TEST(std::string(o.problem()).find("buffer_size") != std::string::npos);
  BOOST_TEST((o.validate() == ar::errc::invalid_option));
  o = {};
  o.depth = 0;
  BOOST_TEST(std::string(o.problem()).find("depth") != std::string::npos);
  o = {};
  o.timeout = std::chrono::milliseconds(0);
  BOOST_TEST(std::string(o.problem()).find("timeout") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(challenge_and_proof_round_trip_in_40_bytes) {
  proto::challenge c;
  proto::proof p;
  for (std::size_t i = 0; i < c.nonce.size(); ++i) {
    c.nonce[i] = std::byte(i * 7 + 1);
    p.mac[i] = std::byte(255 - i);
  }
  BOOST_TEST(round_trip(c));
  BOOST_TEST(round_trip(p));
  BOOST_TEST(encoded(c).size() == 40u);
  BOOST_TEST(encoded(p).size() == 40u);
  auto bytes = encoded(c);
  bytes.pop_back(); // a truncated challenge is refused
  ar::error_code ec;
  proto::decode(bytes, ec);
  BOOST_TEST((ec == ar::errc::protocol_error));
}

namespace {

/// A batch of a directory, a file and an empty file, built as the sender does.
std::vector<std::byte> sample_batch(std::uint32_t first_file_id) {
  std::vector<std::byte> out(256);
  proto::batch_builder b(out, first_file_id);
  BOOST_TEST(b.fits(3, 0));
  b.add(proto::entry_kind::directory, 0755, "dir", 0);
  auto data = b.add(proto::entry_kind::file, 0640, "dir/f", 5);
  BOOST_REQUIRE(data.size() == 5u);
  std::memcpy(data.data(), "hello", 5);
  b.set_crc(proto::crc32c(0, data));
  b.add(proto::entry_kind::file, 0600, "empty", 0);
  BOOST_TEST(b.count() == 3u);
  out.resize(b.finish());
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_file_batch_carries_whole_entries_with_consecutive_ids) {
  auto bytes = sample_batch(41);
  BOOST_TEST(bytes.size() ==
             proto::batch_header_size + 3 * proto::record_header_size + 3 + 5 + 5 + 5);
  ar::error_code ec;
  auto m = proto::decode(bytes, ec);
  BOOST_REQUIRE(!ec);
  BOOST_REQUIRE(std::holds_alternative<proto::file_batch>(m));
  auto batch = std::get<proto::file_batch>(m);
  BOOST_TEST(batch.first_file_id == 41u);
  BOOST_TEST(batch.count == 3u);
  auto rest = batch.records;
  proto::batch_record r;
  BOOST_REQUIRE(proto::take_record(rest, 41, r));
  BOOST_TEST((r.entry.kind == proto::entry_kind::directory));
  BOOST_TEST(r.entry.name == "dir");
  BOOST_TEST(r.entry.mode == 0755u);
  BOOST_TEST(r.data.empty());
  BOOST_REQUIRE(proto::take_record(rest, 42, r));
  BOOST_TEST(r.entry.file_id == 42u);
  BOOST_TEST((r.entry.kind == proto::entry_kind::file));
  BOOST_TEST(r.entry.name == "dir/f");
  BOOST_TEST(r.entry.mode == 0640u);
  BOOST_TEST(r.entry.size == 5u);
  BOOST_TEST(std::memcmp(r.data.data(), "hello", 5) == 0);
  BOOST_TEST(r.crc32c == proto::crc32c(0, r.data));
  BOOST_REQUIRE(proto::take_record(rest, 43, r));
  BOOST_TEST(r.entry.name == "empty");
  BOOST_TEST(r.data.empty());
  BOOST_TEST(rest.empty());
  // The header: type 11, then the first id and the count, big-endian.
  BOOST_TEST(int(bytes[5]) == 11);
  BOOST_TEST(int(bytes[11]) == 41);
  BOOST_TEST(int(bytes[13]) == 3);
}

BOOST_AUTO_TEST_CASE(a_batch_builder_takes_only_what_fits) {
  std::vector<std::byte> out(proto::batch_header_size + proto::record_header_size + 10);
  proto::batch_builder b(out, 0);
  BOOST_TEST(b.fits(4, 6));  // exactly the room left
  BOOST_TEST(!b.fits(4, 7)); // one byte more
  BOOST_TEST(!b.fits(0, 1)); // no name
  BOOST_TEST(!b.fits(proto::max_name_length + 1, 0));
  b.add(proto::entry_kind::file, 0600, "name", 6);
  BOOST_TEST(!b.fits(1, 0));
  BOOST_TEST(b.finish() == out.size());
}

BOOST_AUTO_TEST_CASE(malformed_file_batches_are_protocol_errors) {
  const auto good = sample_batch(0);
  const auto& check = check_refused;
  const std::size_t first = proto::batch_header_size; // the directory's record
  const std::size_t second = first + proto::record_header_size + 3;
  auto bad = good;
  bad[13] = std::byte{0};
  check(bad, "no record");
  bad = good;
  bad[13] = std::byte{4};
  check(bad, "more records announced than there are");
  bad = good;
  bad[13] = std::byte{2};
  check(bad, "bytes after the last record");
  check(std::vector<std::byte>(good.begin(), good.end() - 1), "the last record truncated");
  bad = good;
  bad[15] = std::byte{1};
  check(bad, "reserved field set");
  bad = good;
  bad[first] = std::byte{3};
  check(bad, "unknown kind");
  bad = good;
  bad[first + 1] = std::byte{1};
  check(bad, "flags set (no resume in a batch)");
  bad = good;
  bad[first + 2] = std::byte{0};
  bad[first + 3] = std::byte{0};
  check(bad, "empty name");
  bad = good;
  bad[first + 2] = std::byte{0x01}; // 259 bytes
  check(bad, "name longer than the record");
  bad = good;
  bad[first + 5] = std::byte{0x10}; // mode 010755
  check(bad, "mode beyond 07777");
  bad = good;
  bad[first + 11] = std::byte{1};
  check(bad, "a directory with data");
  bad = good;
  bad[first + 15] = std::byte{1};
  check(bad, "a directory with a checksum");
  bad = good;
  bad[second + 8] = std::byte{0x7f};
  check(bad, "a file's size beyond the message");
}
