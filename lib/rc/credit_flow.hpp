// Flow control by credits, for transports without RNR retry (iWARP). On InfiniBand and
// RoCE a send that finds no receive buffer posted is retried by the transport (RNR) until
// one is: that is async_send's flow control. iWARP has no such retry: the message
// terminates the connection. So there the library counts instead:
//
// - Each end offers, appended to its connect or accept private data, its receive depth
//   and the address and rkey of an 8-byte word (credit_offer).
// - The receiving end keeps the peer's word up to date with how many receives it has ever
//   posted, by an RDMA write (no receive used) when the peer may run short
//   (credit_reporter decides when).
// - The sending end posts a message only while its count of messages sent is below that
//   count (send_window::limit_by_credits); otherwise it waits, in order, and checks the
//   word again after its own completions or after rnr_retry_delay.
//
// A peer that offers nothing (not this library, or an older one) is neither limited nor
// reported to. No verbs call here: test/unit/rc/credit_flow_test.cpp covers it.
#pragma once

#include <boost/endian/conversion.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace asio_rdma::detail {

/// What one end tells the other at connection time.
struct credit_offer {
  /// Receives the offering end has posted for this connection; 0 when its receives are
  /// shared with other connections (a shared receive queue), whose senders then go
  /// unlimited as on a transport with RNR retry.
  std::uint32_t receive_depth = 0;
  /// Where the peer writes its receive count: an 8-byte word, remotely writable.
  std::uint32_t rkey = 0;
  std::uint64_t address = 0;

  friend bool operator==(const credit_offer&, const credit_offer&) = default;
};

/// The offer's wire form, appended after the user's private data: 8 bytes of magic (so
/// that an application's own private data is not taken for an offer), then depth, rkey,
/// address, little endian.
inline constexpr std::size_t credit_offer_size = 24;
inline constexpr std::array<unsigned char, 8> credit_offer_magic{'a', 'r', 'd', 'm',
                                                                 'a', 'c', 'r', '1'};

/// Writes `user` then the offer into `out`; returns the bytes written. `out` must hold
/// user.size() + credit_offer_size.
inline std::size_t append_offer(std::span<std::byte> out, std::span<const std::byte> user,
                                const credit_offer& offer) noexcept {
  std::memcpy(out.data(), user.data(), user.size());
  std::byte* p = out.data() + user.size();
  std::memcpy(p, credit_offer_magic.data(), 8);
  boost::endian::store_little_u32(reinterpret_cast<unsigned char*>(p + 8), offer.receive_depth);
  boost::endian::store_little_u32(reinterpret_cast<unsigned char*>(p + 12), offer.rkey);
  boost::endian::store_little_u64(reinterpret_cast<unsigned char*>(p + 16), offer.address);
  return user.size() + credit_offer_size;
}

/// The offer at the end of a peer's private data, if there is one; `data` is shortened
/// to the application's part. iWARP delivers private data at its exact length, so the
/// offer is the last bytes.
inline std::optional<credit_offer> take_offer(std::span<const std::byte>& data) noexcept {
  if (data.size() < credit_offer_size)
    return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + data.size() -
                                                         credit_offer_size);
  if (std::memcmp(p, credit_offer_magic.data(), 8) != 0)
    return std::nullopt;
  credit_offer offer;
  offer.receive_depth = boost::endian::load_little_u32(p + 8);
  offer.rkey = boost::endian::load_little_u32(p + 12);
  offer.address = boost::endian::load_little_u64(p + 16);
  data = data.first(data.size() - credit_offer_size);
  return offer;
}

/// The credit word: the receive count (modulo 2^32) in the low half and its complement in
/// the high half, so that a word caught half written is recognised and passed over.
inline std::uint64_t credit_word(std::uint32_t posted) noexcept {
  return (std::uint64_t(~posted) << 32) | posted;
}
inline std::optional<std::uint32_t> posted_in(std::uint64_t word) noexcept {
  const auto posted = static_cast<std::uint32_t>(word);
  if (static_cast<std::uint32_t>(word >> 32) != static_cast<std::uint32_t>(~posted))
    return std::nullopt;
  return posted;
}

/// The receiving end's side: counts receives posted and messages arrived, and decides
/// when the peer hears of the receives posted since it last did. Reporting every repost
/// would cost a write per message; reporting late would stall the sender. So: once a
/// quarter of the depth has been reposted, or as soon as the sender may be down to a
/// quarter of the depth (what it was told less what arrived).
class credit_reporter {
public:
  /// `depth` receives are posted and the peer knows it (its offer said so).
  void start(std::uint32_t depth) noexcept {
    posted_ = advertised_ = depth;
    arrived_ = 0;
    threshold_ = std::max<std::uint32_t>(1, depth / 4);
  }
  void posted(std::uint32_t count) noexcept { posted_ += count; }
  void arrived() noexcept { ++arrived_; }

  bool should_report() const noexcept {
    const std::uint32_t unreported = posted_ - advertised_;
    const std::uint32_t peer_credits = advertised_ - arrived_; // at most; fewer in flight
    return unreported > 0 && (unreported >= threshold_ || peer_credits <= threshold_);
  }
  /// The count to write now; it counts as reported.
  std::uint32_t report() noexcept { return advertised_ = posted_; }

private:
  std::uint32_t posted_ = 0;
  std::uint32_t advertised_ = 0;
  std::uint32_t arrived_ = 0;
  std::uint32_t threshold_ = 1;
};

} // namespace asio_rdma::detail
