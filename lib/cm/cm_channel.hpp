// An rdma_cm event channel whose fd is waited on by the user's io_context.
// Events are routed by cm_id->context to a cm_event_target; no thread, no map.
#pragma once

#include "asio_alias.hpp"
#include "async/fd_waiter.hpp"
#include "verbs/handles.hpp"

#include <asio_rdma/error.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

namespace asio_rdma::detail {

/// A copy of an rdma_cm_event, taken before the event is acknowledged so that
/// acknowledging never waits on user code (rdma_destroy_id blocks until all of
/// an id's events are acknowledged).
struct cm_event {
  rdma_cm_event_type type{};
  int status = 0;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* listen_id = nullptr;
  std::uint8_t initiator_depth = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t private_data_len = 0;
  // rdma_cm's lengths are 8-bit: 255 bytes at most (a 256-byte array would
  // make a full copy's length wrap to 0).
  std::array<std::byte, 255> private_data{};
  // RDMA_PS_UDP ids: the peer's (or multicast group's) queue pair and the
  // path to it (ESTABLISHED, MULTICAST_JOIN).
  std::uint32_t ud_qp_num = 0;
  std::uint32_t ud_qkey = 0;
  ibv_ah_attr ud_ah_attr{};

  std::span<const std::byte> data() const { return {private_data.data(), private_data_len}; }

  /// Copies an event's private data (`data` may be null, `length` anything: at
  /// most private_data.size() bytes are kept).
  void set_private_data(const void* data, std::size_t length) noexcept {
    private_data_len = 0;
    if (!data || length == 0)
      return;
    private_data_len = static_cast<std::uint8_t>(std::min(length, private_data.size()));
    std::memcpy(private_data.data(), data, private_data_len);
  }
};

/// Receives the events of the ids whose context points to it.
class cm_event_target {
public:
  virtual void on_cm_event(const cm_event& event) = 0;

protected:
  ~cm_event_target() = default;
};

class cm_channel : public std::enable_shared_from_this<cm_channel> {
public:
  /// Creates the channel. It waits for events only while some id's owner
  /// has declared interest (an operation pending).
  static std::shared_ptr<cm_channel> create(const asio::any_io_executor& ex, error_code& ec);

  cm_channel(const asio::any_io_executor& ex, event_channel_ptr channel);
  ~cm_channel();
  cm_channel(const cm_channel&) = delete;
  cm_channel& operator=(const cm_channel&) = delete;

  const asio::any_io_executor& get_executor() const { return ex_; }

  /// Creates an id on this channel whose events go to `target` (may be null:
  /// events are then acknowledged and dropped).
  cm_id_ptr create_id(cm_event_target* target, rdma_port_space ps, error_code& ec);

  void add_interest() { waiter_.add_interest(); }
  void remove_interest() { waiter_.remove_interest(); }

  /// Dispatches every queued event (also called directly, e.g. before
  /// deciding that a connection is still open).
  void drain();

private:
  static void on_readable(void* self) { static_cast<cm_channel*>(self)->drain(); }

  asio::any_io_executor ex_;
  event_channel_ptr channel_;
  fd_waiter waiter_;
};

} // namespace asio_rdma::detail
