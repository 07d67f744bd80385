// The state behind asio_rdma::connection: queue pair, completion queue,
// registered send and receive buffers, and the queues of operations.
#pragma once

#include "async/completion_queue.hpp"
#include "async/object_pool.hpp"
#include "async/self_hold.hpp"
#include "cm/cm_channel.hpp"
#include "rc/arrival_queue.hpp"
#include "rc/close_reason.hpp"
#include "rc/credit_flow.hpp"
#include "rc/establishment.hpp"
#include "rc/keepalive_monitor.hpp"
#include "rc/operation.hpp"
#include "rc/operation_count.hpp"
#include "rc/send_window.hpp"
#include "verbs/device.hpp"
#include "verbs/receive_ring.hpp"

#include <asio_rdma/connection.hpp>
#include <asio_rdma/connection_options.hpp>
#include <asio_rdma/detail/posted_continuation.hpp>
#include <asio_rdma/queue_pair_endpoint.hpp>

#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace asio_rdma::detail {

class shared_queues_impl;
class connection_impl;

/// Cancels one queued operation through the Asio cancellation slot.
struct op_canceller {
  connection_impl* impl;
  operation* op;
  void operator()(asio::cancellation_type type);
};

/// A layer above that owns a connection's messages (a stream): told of each message as it
/// arrives, in order, with no receive operation per message (connection_impl::listen).
struct message_listener {
  /// (context, ec, message), always from the completion path: a message, its body (if it
  /// has one) copied into `into`; or ec set: errc::buffer_too_small for a body longer than
  /// `into` (dropped; the listener stays), or the connection's end, what a receive would
  /// get (eof, or the transport's error), after which the listener is removed.
  void (*function)(void* context, error_code ec, const received_message& message) = nullptr;
  void* context = nullptr;
  std::span<std::byte> into;

  explicit operator bool() const noexcept { return function != nullptr; }
};

class connection_impl final : public cm_event_target,
                              public std::enable_shared_from_this<connection_impl> {
public:
  connection_impl(const asio::any_io_executor& ex, const connection_options& options);
  ~connection_impl();

  // Establishment.
  void start_connect(std::string host, std::uint16_t port, connection_operation&& op);
  void start_accept(std::shared_ptr<cm_channel> channel, cm_id_ptr id, const cm_event& request,
                    connection_operation&& op);

  // Operations (see connection.hpp for their contracts).
  void send(const buffer_view<asio::const_buffer>& buffers, std::optional<std::uint32_t> immediate,
            size_operation&& pending);
  /// `overtakes`: may pass every queued request (keepalive's probe).
  void work(const work_request& request, size_operation&& pending, bool overtakes = false);
  /// For the library's own protocols (a stream's small write): posts `request` now,
  /// inline and complete at once, with no handler and no completion of its own (one in
  /// send_window::signal_interval asks for one, to recycle the send queue), and returns
  /// true; its bytes are in the work request, so the memory it names is free again. Returns
  /// false, having done nothing, unless that can be done at once: the connection open on a
  /// device other than iWARP (whose sends complete on acknowledgement:
  /// connection_options::send_completion), nothing queued before it (order), nothing posted
  /// awaiting its acknowledgement (RC's order, as for a send completed at post), room in
  /// the send queue, and the request inline-sized and valid. A transport error that comes
  /// later fails the connection, as for any send completed at post.
  bool post_completed(const work_request& request);
  void batch(std::span<const batch_entry> entries, size_operation&& pending);
  /// A receive into `buffers`, or with `lends`, one that lends the message in its ring slot
  /// (buffers empty).
  void receive(const buffer_view<asio::mutable_buffer>& buffers, message_operation&& pending,
               bool lends = false);
  /// A lent_message gives its ring slot back (lent_message::release).
  void take_back(std::uint32_t slot) noexcept;
  /// The bytes of receive ring slot `slot` (its own ring, or the shared receive queue's).
  const std::byte* receive_slot_bytes(std::uint32_t slot) const noexcept {
    return receives_->slot(slot);
  }
  void disconnect(pending_operation<void(error_code)>&& pending);
  void close() noexcept;

  void on_cm_event(const cm_event& event) override;

  // Out of band (no rdma_cm; out_of_band.cpp): a queue pair on `context`'s
  // port, moved to INIT with its receives posted, then connected to a peer's
  // endpoint by connect_out_of_band (RTR, RTS).
  error_code prepare_out_of_band(std::shared_ptr<void> device_list, ibv_context* context,
                                 std::uint8_t port, int gid_index, queue_pair_endpoint& local);
  error_code connect_out_of_band(const queue_pair_endpoint& remote);

  /// A receive completed into slot `index` of this connection's receive ring
  /// (its own, or the shared receive queue's).
  void handle_receive(std::uint32_t index, const ibv_wc& wc, from origin);
  /// Sends or released receive buffers are waiting to be posted.
  bool has_unposted_work() const {
    return sends_.has_queued() || (!shared_ && receives_->post_due());
  }
  /// Posts queued sends and released receive buffers. The sends that complete when posted
  /// complete from `origin` (from::user_call inside an initiating function).
  void post_queued(from origin = from::completion_path);

  const asio::any_io_executor& get_executor() const { return ex_; }
  bool is_open() const noexcept { return state_ == state::open; }
  const connection_options& options() const { return options_; }
  const connection_statistics& statistics() const noexcept { return statistics_; }
  std::span<const std::byte> peer_private_data() const { return peer_private_data_; }
  rdma_cm_id* id() const { return id_.get(); }
  ibv_qp* qp() const { return qp_; }
  ibv_pd* pd() const { return device_ ? device_->pd.get() : nullptr; }
  /// Keeps the device's protection domain alive (for memory regions).
  std::shared_ptr<void> device_handle() const { return device_; }
  /// The device carries immediate data (every transport but iWARP).
  bool has_immediate_data() const noexcept { return device_ && device_->has_immediate_data(); }
  /// The device is SoftRoCE: the poster's CPU runs an RDMA operation (device::soft_roce).
  bool on_soft_roce() const noexcept { return device_ && device_->soft_roce; }
  /// This end accepted an iWARP connection: it must not send before the connecting end's
  /// first message has arrived (MPA, RFC 5044 7.1.4). siw's connecting end otherwise
  /// fails when the accepting end's first message overtakes its handshake
  /// (RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, while the acceptor sees ESTABLISHED).
  bool waits_for_first_message() const noexcept { return accepted_ && device_ && device_->iwarp; }

  /// Withdraws a queued (not yet posted) operation; called by its
  /// cancellation slot.
  void cancel(operation* op);

  /// A handler of a batch of this connection's own completion queue is running, and the
  /// batch came from the completion path (not a poll inside a user's call): an operation
  /// of a layer above that completes now may leave its handler to the batch's end
  /// (on_batch_end) instead of posting it. As a send completed at post does here.
  bool completes_at_batch_end() const {
    return inside_own_batch() && cq_->batch_origin() == from::completion_path;
  }
  /// Calls `listener` at the end of each batch of this connection's own completion
  /// queue, after the work queued during it is posted (after_cq_batch). One listener (a
  /// stream's); an empty callback removes it. The listener must remove itself before it
  /// is destroyed.
  void on_batch_end(callback listener) noexcept { batch_end_listener_ = listener; }
  /// Hands every message from now on (those already arrived first) to `listener` instead
  /// of receive operations, which then fail (invalid_argument): one listener, set once,
  /// counted as a pending operation while set. Messages are handed over from the
  /// completion path (a batch of the completion queue, or a posted task), never inside a
  /// user's call. An empty listener removes it; the listener must remove itself before
  /// it is destroyed, and keep itself alive while its function runs if what it calls may
  /// destroy it.
  void listen(message_listener listener);

private:
  using state = connection_state; // establishment.hpp

  void resolve_address(const boost::asio::ip::tcp::endpoint& destination);
  error_code create_resources(ibv_context* context);
  error_code create_qp(ibv_qp_init_attr& attr);
  error_code create_out_of_band_qp(ibv_qp_init_attr& attr);
  void finish_establishment(const cm_event& event);
  void fail_establishment(error_code ec, from origin);
  void abandon_handshake();
  void end_abandoned();
  void arm_timeout(bool for_disconnect);
  /// Calls `member` once `delay` has passed on `timer`, unless the timer is cancelled or
  /// re-armed first, or this object is gone (the wait holds it weakly).
  template <void (connection_impl::*member)()>
  void call_after(asio::steady_timer& timer, std::chrono::steady_clock::duration delay) {
    timer.expires_after(delay);
    timer.async_wait([weak = weak_from_this()](const error_code& ec) {
      if (auto self = weak.lock(); self && !ec)
        (self.get()->*member)();
    });
  }
  /// Runs `member` from a task posted to the connection's executor: once, however often
  /// this is called before the task runs (`flag` is set meanwhile). The task holds the
  /// connection and counts as posted work for a busy-polling completion queue.
  template <bool connection_impl::*flag, void (connection_impl::*member)()> void post_once() {
    if (this->*flag)
      return;
    this->*flag = true;
    work_posted = true;
    post_continuation(ex_, [self = shared_from_this()] {
      self.get()->*flag = false;
      (self.get()->*member)();
    });
  }
  error_code set_ack_timeout();
  error_code set_rnr_timer();
  void arm_keepalive();
  void keepalive_tick();

  // Flow control by credits on iWARP (credit_flow.hpp, connection_credits.cpp).
  error_code prepare_credits();
  /// The user's private data, with our credit offer appended where we make one.
  std::span<const std::byte> private_data_to_send();
  /// Keeps the peer's private data for the user, less the credit offer it may end with,
  /// which starts the flow control.
  void take_peer_private_data(std::span<const std::byte> data);
  /// Takes the peer's count of posted receives; only while sends_.credit_limited().
  void refresh_credits();
  void wait_for_credits();
  void report_credits();
  static void on_report_complete(completion_target* target, const ibv_wc& wc, from origin);

  /// A batch of this connection's own completion queue is being dispatched: its end
  /// (after_cq_batch) posts what is queued.
  bool inside_own_batch() const { return cq_ && !shared_ && cq_->polling(); }
  /// Posts queued sends and released receive buffers at the end of this io_context turn,
  /// or, inside a batch of our own completion queue (a handler it runs started a send, as
  /// a ping-pong's next request, or gave a buffer back), at the end of that batch
  /// (after_cq_batch): then no task of its own, so a busy-polling queue does not yield its
  /// turn (a reactor pass, an epoll_wait) for it.
  void schedule_post() {
    if (!inside_own_batch())
      post_once<&connection_impl::post_scheduled_, &connection_impl::post_task>();
  }
  void post_task() { post_queued(); } // the task schedule_post() posts
  /// Posts what the send queue has room for; the sends that complete when posted complete
  /// from `origin`.
  void post_sends(ibv_qp* qp, from origin);
  /// The request completes when posted (connection_options::send_completion).
  bool completes_at_post(const operation* op) const noexcept;
  /// Completes the sends from `first` up to `end` (not included) of a posted chain that
  /// complete when posted: their handlers run now from the completion path, or from a
  /// posted task after a user's call.
  void complete_posted_sends(ibv_send_wr* first, const ibv_send_wr* end, from origin);
  /// Runs the handlers due now (from::completion_path), or from a posted task (after a
  /// user's call, where no handler may run).
  void run_due(from origin) {
    if (!due_)
      return;
    if (origin == from::completion_path)
      return run_due_handlers();
    post_once<&connection_impl::due_run_scheduled_, &connection_impl::run_due_handlers>();
  }
  void run_due_handlers();
  void prepare_send(operation* op);
  void release_send_slot(operation* op) {
    if (op->send_slot != operation::no_slot) {
      free_send_slots_.push_back(op->send_slot);
      op->send_slot = operation::no_slot;
    }
  }
  /// A posted request's completion with `status`: all but an acknowledged send completed
  /// at post, which on_send_complete retires itself.
  void finish_posted(operation* op, ibv_wc_status status, from origin);
  /// A send completed at post whose work request is over: its send slot released, and
  /// the record freed, or left to the run of its handler (handler_due) to free.
  void retire_completed_at_post(operation* op) {
    release_send_slot(op);
    if (op->handler_due) {
      op->acknowledged = true; // run_due_handlers frees it
      return;
    }
    --completed_unacknowledged_;
    op_pool_.put(op);
  }
  static void after_cq_batch(void* self);
  static void on_send_complete(completion_target* target, const ibv_wc& wc, from origin);
  static void on_receive_complete(completion_target* target, const ibv_wc& wc, from origin);
  void deliver(operation* op, from origin);
  /// Completes receive `op` with `msg`, which is no longer queued, and frees its slot
  /// (unless `op` lends it).
  void hand_over(operation* op, const arrived_message& msg, from origin);
  /// Hands `msg`, no longer queued, to the listener, and frees its slot.
  void tell_listener(const arrived_message& msg);
  /// Polls the completion queue if nothing waits on it (no operation pending) and no
  /// message is queued: a receive or a listener about to wait would miss what it holds.
  /// Returns this connection, held, when it polled: the handlers the poll ran may have
  /// dropped the last other reference, and the caller goes on using it.
  /// (The check inline, on every receive's path; the poll, rarely needed, out of line.)
  [[nodiscard]] std::shared_ptr<connection_impl> poll_unwatched_cq() {
    // Messages may be waiting in the CQ: nobody polls it while no operation is pending.
    // The poll runs other operations' handlers, which may drop the last reference.
    // (Inside a poll, as when a handler starts the next receive, there is
    // nothing to poll and nothing to keep alive.) Not while the CQ is waited on: for a
    // pending operation (this poll would post the handlers of the receives already
    // waiting, which a completion path running them directly could overtake: receive
    // handlers must run in the order the messages arrived), or still, for a moment, after
    // the last one finished (a send completed at post whose handler, run at its batch's end,
    // starts the next receive: operation_count's deferred update); what arrives then
    // raises the CQ's event as usual.
    if (!arrived_.empty() || state_ != state::open || !cq_ || cq_->polling() || ops_.any() ||
        cq_interest_)
      return nullptr;
    return poll_cq_now();
  }
  std::shared_ptr<connection_impl> poll_cq_now(); // poll_unwatched_cq's poll
  /// The connection ended: the listener is removed and told, from the completion path.
  void end_listener();
  void release_receive(std::uint32_t slot);
  error_code check_work(const work_request& request) const;
  void prepare_work(operation* op, const work_request& request);
  /// Delivers queued messages to the listener or to waiting receives, and fails the
  /// waiting receives of a connection that ended. Nothing queued and still open (the
  /// common case, checked inline on every receive's completion): nothing to do.
  void deliver_waiting(from origin) {
    if (!arrived_.empty() || state_ == state::closing || state_ == state::closed)
      deliver_arrived(origin);
  }
  void deliver_arrived(from origin); // deliver_waiting's work
  /// Delivers what has arrived to waiting receives from a posted task, and reposts the
  /// buffers emptied.
  void schedule_delivery() {
    post_once<&connection_impl::delivery_scheduled_, &connection_impl::delivery_task>();
  }
  void delivery_task(); // the task schedule_delivery() posts
  void fail_waiting_receives(from origin);

  /// Enters the closing state: the queue pair goes to error so that posted
  /// work flushes; queued operations complete with the terminal error.
  void begin_close(error_code reason);
  /// Finishes a close once no posted send is left (receive buffers need no wait, nor do
  /// credit reports: the destroyed queue pair takes them back, and nothing waits on them).
  void maybe_finish_close() {
    if (state_ == state::closing && !lingering_ && sends_.outstanding() == 0)
      finish_close();
  }
  void finish_close();
  /// Moves the queue pair to the error state, telling the peer (rdma_disconnect) if it was
  /// connected.
  void disconnect_queue_pair(bool was_connected);
  /// Bounds the wait for the flush of posted work (2 s), after which the close finishes.
  void bound_drain();
  /// An orderly close with sends completed at post not yet acknowledged: waits (2 s at
  /// most) for the peer to acknowledge them, then disconnects (end_linger).
  void linger();
  void end_linger();
  void teardown();
  /// A flush arrived while open: close with connection_reset unless the CM's
  /// disconnect event comes first (connection_close.cpp).
  void queue_pair_failed();
  /// queue_pair_failed()'s grace period is over: still open, the peer ended abruptly.
  void reset_if_still_open();
  void complete_disconnect(error_code ec);

  /// Completes `op` from `origin`: a receive with `message` (its size `bytes` when there
  /// is none), any other operation with `bytes`.
  void complete(operation* op, error_code ec, std::size_t bytes, from origin,
                const received_message* message = nullptr);
  /// A pooled operation record, reset for a new operation (inline: every operation's path).
  operation* new_op(op_kind kind) {
    operation* op = op_pool_.get();
    op->owner = this;
    op->kind = kind;
    op->posted = false;
    op->counted = false;
    op->atomic = false;
    op->completed_at_post = false;
    op->handler_less = false;
    op->handler_due = false;
    op->acknowledged = false;
    op->immediate.reset();
    op->send_slot = operation::no_slot;
    op->length = 0;
    op->batch = nullptr;
    return op;
  }
  /// Queues a signalled zero-length RDMA write (keepalive's probe; a close's linger),
  /// whatever the state: its completion says the peer acknowledged everything before it.
  /// `overtakes`: it may pass every queued request.
  void queue_probe(size_operation&& done, bool overtakes = false);
  /// A counted operation joins the send queue, posted now or at the batch's end.
  void queue_send(operation* op, bool overtakes = false) {
    op->counted = true;
    op_started();
    if (overtakes)
      sends_.queue_first(op);
    else
      sends_.queue(op);
    post_or_batch(op);
  }
  void post_or_batch(operation* op);
  error_code check_batch(std::span<const batch_entry> entries) const;
  bool finish_batch_part(operation*& op, error_code& ec, std::size_t& bytes);
  void cancel_batch(operation* first);

  // A pending user operation needs the CM channel and the CQ waited on; an
  // idle connection leaves no work in the io_context (operation_count.hpp).
  void op_started() {
    if (ops_.started())
      sync_interest();
  }
  void op_finished() {
    if (!ops_.finished())
      return;
    // Inside a batch of our own CQ the update waits for the batch's end (after_cq_batch),
    // and so it does while that end posts: the handlers of sends completed at post run
    // there, and a ping-pong's next receive follows at once.
    if ((inside_own_batch() || posting_batch_end_) && state_ == state::open)
      ops_.defer_update();
    else
      sync_interest();
  }
  void sync_interest();

  asio::any_io_executor ex_;
  connection_options options_;
  state state_ = state::idle;

  // Members in creation order: destroyed in reverse.
  std::shared_ptr<void> device_list_; // out of band: rdma_get_devices' list, kept
  std::shared_ptr<cm_channel> channel_;
  cm_id_ptr id_;
  std::shared_ptr<device> device_;
  std::shared_ptr<completion_queue> cq_;
  std::shared_ptr<shared_queues_impl> shared_; // shared CQ + SRQ, if any
  std::uint32_t shared_entries_ = 0;           // of the shared CQ, taken for the send queue
  receive_ring own_receives_;
  receive_ring* receives_ = &own_receives_;
  registered_block send_block_;
  registered_block atomic_block_; // one 8-byte result per send slot
  bool qp_created_ = false;
  ibv_qp* qp_ = nullptr; // id_->qp, or out of band our own

  // Out of band: no rdma_cm id; the port and GID the queue pair uses.
  bool out_of_band_ = false;
  bool accepted_ = false;            // made by start_accept
  bool handshake_under_way_ = false; // iWARP: rdma_connect sent, the peer's answer not in
  std::uint8_t port_num_ = 0;
  int gid_index_ = 0;
  std::uint8_t link_layer_ = 0;
  std::uint32_t path_mtu_code_ = 0; // ibv_mtu of our port
  std::uint32_t psn_ = 0;

  arrival_queue arrived_; // capacity receive_queue_depth

  std::vector<std::uint32_t> free_send_slots_;
  std::uint32_t inline_limit_ = 0;
  std::uint32_t max_send_sge_ = 1;
  connection_statistics statistics_; // counted in post_queued() and prepare_send()

  object_pool<operation> op_pool_;
  /// Sends completed when posted whose work requests are still in the send window (not
  /// known to be acknowledged): a close waits for them (linger).
  std::uint32_t completed_unacknowledged_ = 0;
  /// Posted requests that complete on acknowledgement (one-sided work, zero-copy sends,
  /// probes, sends in that mode) and have not completed: while there is one, a send does
  /// not complete at post, so that a send's completion still says that every request
  /// posted before it has completed (RC's order, which protocols rely on: "write the data,
  /// send the notice, reuse the buffer when the notice completes").
  std::uint32_t awaiting_acknowledgement_ = 0;
  // Sends completed at post whose handlers have not run yet, in posting order (linked by
  // operation::next).
  operation* due_ = nullptr;
  operation** due_tail_ = &due_;
  bool due_run_scheduled_ = false;
  bool running_due_ = false;
  bool posting_batch_end_ = false; // after_cq_batch posts what its batch queued
  /// Copied sends complete when posted (send_completion::at_post, not on iWARP).
  bool sends_complete_at_post_ = false;
  bool rang_in_batch_ = false; // a send completed at post was posted during the batch
  bool lingering_ = false; // linger(): closing, not yet disconnected
  intrusive_queue<operation> waiting_receives_;
  send_window<operation> sends_; // queued and posted sends, one-sided work, atomics
  bool post_scheduled_ = false;
  bool delivery_scheduled_ = false;
  callback batch_end_listener_; // on_batch_end
  message_listener listener_;    // listen
  operation_count ops_;           // pending user operations
  bool channel_interest_ = false; // the waits held for them
  bool cq_interest_ = false;

  // Credits (iWARP): the word the peer reports into and our reports' sources; the offer
  // sent; what we report to the peer; a sender's wait for the word to change.
  static constexpr std::uint32_t report_slots = 2; // reports in flight at most
  struct report_target : completion_target {
    connection_impl* owner = nullptr;
  };
  registered_block credit_block_;
  std::array<std::byte, 256> offer_data_{};
  credit_reporter reporter_;
  bool reports_credits_ = false;
  std::uint64_t peer_word_address_ = 0;
  std::uint32_t peer_word_rkey_ = 0;
  report_target report_target_;
  std::uint32_t reports_in_flight_ = 0;
  std::uint32_t next_report_slot_ = 0;
  asio::steady_timer credit_timer_;
  bool credit_timer_armed_ = false;
  bool queue_pair_failed_ = false;

  close_reason ending_; // why the connection left the open state: what operations get

  std::vector<std::byte> peer_private_data_;
  pending_operation<void(error_code, connection)> establish_handler_;
  pending_operation<void(error_code)> disconnect_handler_;
  asio::steady_timer timer_;       // establishment and disconnect timeout
  asio::steady_timer drain_timer_; // bound on waiting for flushes when closing

  // Keepalive (connection_options::keepalive_interval): the timer here, the decision in
  // keepalive_; completions_ counts the completions it compares once per interval.
  asio::steady_timer keepalive_timer_;
  keepalive_monitor keepalive_;
  std::uint32_t completions_ = 0;

  /// Keeps the implementation alive while the device may still complete work
  /// into its memory, even after the user's connection object is gone (until the close
  /// finishes, or the io_context is destroyed).
  self_hold self_;
};

} // namespace asio_rdma::detail
