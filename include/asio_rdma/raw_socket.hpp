// asio-rdma: raw Ethernet packet socket with flow rules.
//
// One API over two backends: a verbs IBV_QPT_RAW_PACKET queue pair with ibv_create_flow steering
// (NICs that support it: matching frames bypass the kernel), and an AF_PACKET socket with a
// TPACKET_V3 receive ring and a BPF filter compiled from the flow rules (any Linux interface;
// matching frames are copied, the kernel still sees them).
//
//   auto sock = asio_rdma::raw_socket::open(ex, "eth4", {.receive_buffers = 4096});
//   auto flow = sock.add_flow({.destination_mac =
//   asio_rdma::parse_mac_address("01:80:c2:00:00:00")}); for (;;) {
//     auto batch = co_await sock.async_receive(64, std::chrono::seconds(1));
//     for (const auto& packet : batch) handle(packet.data);
//   }                                  // batch destroyed: its buffers go back at once
//
// Threading: like an Asio socket, a raw_socket (and the batches and flow handles it lends) is
// not thread-safe; use it from the threads running its executor, one at a time (a strand or a
// single-threaded io_context). The library starts no thread of its own: the socket's file
// descriptors are waited on by the executor's io_context.
#pragma once

#include <asio_rdma/error.hpp>
#include <asio_rdma/flow_rule.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace asio_rdma {

namespace detail {
class raw_socket_core;
struct raw_packet_access;
} // namespace detail

/// Which implementation a raw_socket uses.
enum class raw_backend {
  /// packet, for now: the verbs backend's data path has not yet run on a NIC with raw
  /// packet queue pairs (SoftRoCE has none), so it is used only when asked for by name
  /// (docs/raw_socket.md).
  automatic,
  /// IBV_QPT_RAW_PACKET queue pair and ibv_create_flow (needs CAP_NET_RAW and a NIC that
  /// supports it; SoftRoCE does not: open fails with errc::raw_packet_unsupported).
  verbs,
  /// AF_PACKET socket, TPACKET_V3 receive ring, BPF filter (needs CAP_NET_RAW).
  packet,
};

/// Parameters of raw_socket::open. Out-of-range values fail open with errc::invalid_option.
struct raw_socket_options {
  /// Send buffers (1..65536): how many packets can be acquired or in flight at once.
  std::size_t send_buffers = 64;
  /// Receive buffers (1..1048576). verbs: posted receive buffers, one frame each. packet: the
  /// TPACKET_V3 ring holds this many maximal frames (more smaller ones) in at least 16 blocks;
  /// a lent packet pins its block, so holding many batches at once under light load (one
  /// frame per block) can fill the ring: min(receive_buffers, 16) batches can always be held.
  std::size_t receive_buffers = 1024;
  /// Bytes per buffer (64..65536), including the Ethernet header. Longer received frames are
  /// truncated (received_packet::wire_length tells the original length).
  std::size_t max_packet_size = 2048;
  /// Flow rule slots (1..64).
  std::size_t max_flows = 16;
  /// The implementation to use.
  raw_backend backend = raw_backend::automatic;
};

/// What the open socket's backend offers.
struct raw_caps {
  /// The backend in use (never automatic).
  raw_backend backend = raw_backend::packet;
  /// True when matching frames are taken away from the kernel's network stack (verbs flow
  /// steering); false when they are copied and the kernel still processes them (packet).
  bool steals_matching_packets = false;
  /// True when received_packet::timestamp is set (packet: kernel software timestamps).
  bool receive_timestamps = false;
  /// True when the device verifies and computes IPv4/TCP/UDP checksums for raw packets.
  bool checksum_offload = false;
  /// True when a received 802.1Q tag stays in the packet data (verbs); false when the kernel
  /// removed it (packet). Either way received_packet::vlan_tci reports it.
  bool vlan_tag_in_data = false;
  /// The sizes the socket was opened with.
  std::size_t send_buffers = 0;
  /// Receive buffers.
  std::size_t receive_buffers = 0;
  /// Largest frame in bytes.
  std::size_t max_packet_size = 0;
  /// Most flow rules installed at once.
  std::size_t max_flows = 0;
};

/// Counters since open.
struct raw_statistics {
  /// Packets delivered to the user.
  std::uint64_t received = 0;
  /// Matching packets the backend dropped for lack of free receive buffers (packet backend:
  /// the kernel's count; verbs: not available, 0).
  std::uint64_t receive_dropped = 0;
  /// Packets handed to the kernel or NIC.
  std::uint64_t sent = 0;
  /// Packets the kernel dropped on the way out for congestion (ENOBUFS), as a wire would.
  std::uint64_t send_dropped = 0;
};

/// One received frame, lent by a receive_batch. Valid until the batch is released.
struct received_packet {
  /// The frame as captured, starting with the Ethernet header (at most max_packet_size bytes).
  /// Writable: the buffer belongs to the user until the batch is released.
  std::span<std::byte> data;
  /// The frame's length on the wire (larger than data.size() when it was truncated).
  std::size_t wire_length = 0;
  /// When the frame was received, if raw_caps::receive_timestamps; else the epoch.
  std::chrono::system_clock::time_point timestamp{};
  /// The 802.1Q tag control information (priority, DEI, VLAN id = tci & 0x0fff) when the
  /// frame was tagged.
  std::optional<std::uint16_t> vlan_tci;

private:
  friend struct detail::raw_packet_access;
  // Which of the backend's buffers lends `data`: the library's alone, so that releasing
  // the batch can never hand back a buffer it did not lend.
  std::uint32_t buffer_id_ = 0;
};

/// Received packets lent by raw_socket::async_receive. Move-only. Destroying the batch or
/// calling release() hands its buffers back to the socket at once; until then they cannot
/// receive new frames. A batch may outlive close() and the socket itself: its packets stay
/// valid (the buffer memory is kept until the last lent batch is released), and releasing it
/// afterwards only frees that memory.
class receive_batch {
public:
  /// The element type.
  using value_type = received_packet;
  /// Iterates over the packets.
  using const_iterator = const received_packet*;

  receive_batch() noexcept = default;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  receive_batch(receive_batch&& other) noexcept = default;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  receive_batch& operator=(receive_batch&& other) noexcept;
  ~receive_batch() { release(); }

  /// Number of packets (never 0 for a batch from a successful async_receive).
  std::size_t size() const noexcept { return packets_.size(); }
  /// True if it holds no packet.
  bool empty() const noexcept { return packets_.empty(); }
  /// The i-th packet (i < size()).
  const received_packet& operator[](std::size_t i) const noexcept { return packets_[i]; }
  /// The first packet.
  const_iterator begin() const noexcept { return packets_.data(); }
  /// Past the last packet.
  const_iterator end() const noexcept { return packets_.data() + packets_.size(); }

  /// Hands the buffers back to the socket; the batch becomes empty. Idempotent.
  void release() noexcept;

private:
  friend class detail::raw_socket_core;
  std::shared_ptr<detail::raw_socket_core> owner_;
  std::vector<received_packet> packets_;
};

/// One send buffer, lent by a send_batch: fill buffer() with a whole frame (Ethernet header
/// first) and set `length`.
class send_packet {
public:
  /// The buffer to fill, max_packet_size bytes of the socket's send memory. Which buffer a
  /// packet lends is fixed: the library sends from that memory (registered with the NIC on
  /// the verbs backend), so only its bytes and `length` are the user's to set.
  std::span<std::byte> buffer() const noexcept { return buffer_; }
  /// Bytes of buffer() to send: 14 (an Ethernet header) up to buffer().size(); async_send
  /// fails with asio::error::invalid_argument otherwise.
  std::size_t length = 0;

private:
  friend struct detail::raw_packet_access;
  std::span<std::byte> buffer_;
  std::uint32_t buffer_id_ = 0;
};

/// Send buffers lent by raw_socket::async_acquire, to be filled and passed to async_send.
/// Move-only. Destroying it (or release()) without sending returns the buffers unsent.
/// Like a receive_batch it may outlive close() and the socket: its buffers stay writable,
/// but there is nothing left to send them with (async_send on a closed socket fails with
/// asio::error::bad_descriptor).
class send_batch {
public:
  /// The element type.
  using value_type = send_packet;
  /// Iterates over the packets.
  using iterator = send_packet*;

  send_batch() noexcept = default;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  send_batch(send_batch&& other) noexcept = default;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  send_batch& operator=(send_batch&& other) noexcept;
  ~send_batch() { release(); }

  /// Number of packets to fill and send.
  std::size_t size() const noexcept { return packets_.size(); }
  /// True if it holds no packet.
  bool empty() const noexcept { return packets_.empty(); }
  /// The i-th packet, to fill in (i < size()).
  send_packet& operator[](std::size_t i) noexcept { return packets_[i]; }
  /// The i-th packet (i < size()).
  const send_packet& operator[](std::size_t i) const noexcept { return packets_[i]; }
  /// The first packet.
  iterator begin() noexcept { return packets_.data(); }
  /// Past the last packet.
  iterator end() noexcept { return packets_.data() + packets_.size(); }

  /// Keeps the first `n` packets and returns the others' buffers unsent (for a batch that was
  /// acquired larger than needed).
  void truncate(std::size_t n) noexcept;

  /// Returns all buffers unsent; the batch becomes empty. Idempotent.
  void release() noexcept;

private:
  friend class detail::raw_socket_core;
  std::shared_ptr<detail::raw_socket_core> owner_;
  std::vector<send_packet> packets_;
};

/// Owns one installed flow rule (from raw_socket::add_flow). Move-only. Destroying it (or
/// remove()) removes the rule and leaves the multicast group the rule joined. When the slot
/// was meanwhile replaced by set_flow / clear_flow, or the socket is gone, it does nothing.
class flow_handle {
public:
  flow_handle() noexcept = default;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  flow_handle(flow_handle&& other) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  flow_handle& operator=(flow_handle&& other) noexcept;
  ~flow_handle();

  /// The slot index the rule occupies (as used by set_flow / clear_flow).
  std::size_t index() const noexcept { return index_; }
  /// True while the handle still owns an installed rule.
  bool active() const noexcept;

  /// Removes the rule now, reporting failure (the destructor cannot).
  void remove(error_code& ec) noexcept;
  /// Removes the rule now; throws boost::system::system_error on failure.
  void remove();

private:
  friend class detail::raw_socket_core;
  std::weak_ptr<detail::raw_socket_core> owner_;
  std::size_t index_ = 0;
  std::uint64_t generation_ = 0;
};

/// A raw Ethernet packet socket bound to one interface. Move-only; destroying it (or close())
/// completes its outstanding operations with asio::error::operation_aborted, removes its flow
/// rules and leaves its multicast groups.
///
/// Asynchronous operations follow Asio's rules: each takes a completion token (default
/// asio::deferred; callbacks, asio::use_awaitable, asio::use_future, asio::as_tuple, ... work);
/// the handler is never invoked from inside the initiating function; it runs on its associated
/// executor (default: the socket's); per-operation cancellation through the handler's
/// associated cancellation slot is supported (all cancellation types). At most one operation of
/// each kind (receive, acquire, send, flush) may be outstanding: another one of the same kind
/// completes with asio::error::already_started.
class raw_socket {
public:
  /// The type of the executor that runs handlers by default.
  using executor_type = boost::asio::any_io_executor;

  /// Use as async_receive's timeout to wait without limit.
  static constexpr std::chrono::nanoseconds no_timeout = std::chrono::nanoseconds::max();

  /// Opens a socket on `interface_name` (an Ethernet interface). Initially no flow rule is
  /// installed and nothing is received. Throws boost::system::system_error: ENODEV for an
  /// unknown interface, EPERM without CAP_NET_RAW, errc::invalid_option for out-of-range
  /// options, errc::no_device / errc::raw_packet_unsupported when the verbs backend was
  /// requested but the interface has no RDMA device / one without raw packet support.
  static raw_socket open(const executor_type& ex, std::string_view interface_name,
                         const raw_socket_options& options = {});
  /// As above, reporting failure in `ec` (returning a closed socket).
  static raw_socket open(const executor_type& ex, std::string_view interface_name,
                         const raw_socket_options& options, error_code& ec);

  /// A closed socket.
  raw_socket() noexcept;
  /// Move constructor: takes over the resources of the object moved from, which is left empty.
  raw_socket(raw_socket&& other) noexcept;
  /// Move assignment: releases what this object holds, then takes over what the other one held.
  raw_socket& operator=(raw_socket&& other) noexcept;
  ~raw_socket();

  /// True between open() and close().
  bool is_open() const noexcept;
  /// The executor that runs handlers by default.
  executor_type get_executor() const noexcept { return ex_; }

  /// The backend's capabilities and the socket's sizes. Requires is_open().
  const raw_caps& caps() const;
  /// Counters since open. Requires is_open().
  raw_statistics statistics() const;
  /// The interface's MAC address (read at open). Requires is_open().
  mac_address interface_mac() const;
  /// The interface's name and index. Require is_open().
  const std::string& interface_name() const;
  /// The interface index (if_nametoindex).
  unsigned interface_index() const;

  /// Completes the outstanding operations with operation_aborted, removes the flow rules and
  /// leaves the multicast groups. Lent batches stay valid until released, also after the
  /// socket is destroyed.
  void close() noexcept;
  /// Completes the outstanding operations with operation_aborted (posted).
  void cancel() noexcept;

  /// Installs `rule` in the first free slot; the returned handle removes it. Fails with
  /// errc::too_many_flows when all max_flows slots are used, errc::invalid_option for a rule
  /// normalize() rejects, or the OS / verbs error. A multicast ipv4_destination joins the group.
  flow_handle add_flow(const flow_rule& rule);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  flow_handle add_flow(const flow_rule& rule, error_code& ec);

  /// Installs `rule` in slot `index` (0..max_flows-1, else errc::too_many_flows), replacing
  /// the rule there without a gap. A flow_handle for the replaced rule becomes inactive.
  void set_flow(std::size_t index, const flow_rule& rule);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  void set_flow(std::size_t index, const flow_rule& rule, error_code& ec);

  /// Removes the rule in slot `index` (nothing when empty) and leaves its multicast group.
  void clear_flow(std::size_t index);
  /// As the overload above, reporting failure through `ec` instead of throwing.
  void clear_flow(std::size_t index, error_code& ec);

  /// Receives between 1 and `max_packets` frames matching the installed rules.
  ///
  /// Completion signature: void(error_code, receive_batch). Completes as soon as at least one
  /// frame is available, with every frame available then (up to max_packets), never with an
  /// empty batch while time is left. After `timeout` without a frame: asio::error::timed_out
  /// (timeout 0 polls once; no_timeout waits without limit). Cancellation (any type): the
  /// operation completes with asio::error::operation_aborted and an empty batch; no frame is
  /// lost. max_packets == 0: asio::error::invalid_argument.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_receive(std::size_t max_packets, std::chrono::nanoseconds timeout,
                     CompletionToken&& token = boost::asio::deferred_t());

  /// async_receive without a time limit.
  template <typename CompletionToken = boost::asio::deferred_t>
  requires(!std::is_convertible_v<CompletionToken, std::chrono::nanoseconds>) auto async_receive(
      std::size_t max_packets, CompletionToken&& token = boost::asio::deferred_t());

  /// Lends between 1 and `n` free send buffers (each packet's length is 0).
  ///
  /// Completion signature: void(error_code, send_batch). Waits while every buffer is lent or
  /// in flight. Cancellation (any type): operation_aborted with an empty batch.
  /// n == 0: asio::error::invalid_argument.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_acquire(std::size_t n, CompletionToken&& token = boost::asio::deferred_t());

  /// Posts every packet of `batch` for transmission, in order. Completes when all are handed to
  /// the NIC / kernel (not necessarily on the wire yet: see async_flush); the buffers return to
  /// the socket as they leave.
  ///
  /// Completion signature: void(error_code). A packet with a length below 14 or above its
  /// buffer (or a batch of another socket) fails the whole batch with
  /// asio::error::invalid_argument before anything is posted.
  /// Cancellation (any type): packets already posted stay posted, the rest are returned
  /// unsent; operation_aborted.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_send(send_batch batch, CompletionToken&& token = boost::asio::deferred_t());

  /// Waits until everything posted by completed async_send operations (and an outstanding one)
  /// has left: verbs: all send completions arrived; packet: the kernel released every frame.
  ///
  /// Completion signature: void(error_code). Cancellation (any type): operation_aborted.
  template <typename CompletionToken = boost::asio::deferred_t>
  auto async_flush(CompletionToken&& token = boost::asio::deferred_t());

private:
  raw_socket(executor_type ex, std::shared_ptr<detail::raw_socket_core> core) noexcept;

  const detail::raw_socket_core& core() const;

  executor_type ex_;
  std::shared_ptr<detail::raw_socket_core> impl_;
};

} // namespace asio_rdma

#include <asio_rdma/impl/raw_socket.hpp>
