// connection_impl: flow control by credits on iWARP, which has no RNR retry
// (credit_flow.hpp says how it works): the offer in the private data, the word the peer
// writes its receive count into, our reports to the peer, and a sender's wait.
#include "rc/connection_impl.hpp"

#include "rc/shared_queues_impl.hpp"
#include "verbs/verbs_error.hpp"

#include <cstring>

namespace asio_rdma::detail {

namespace {
constexpr std::uint32_t peer_word_slot = 0; // credit_block_'s slot the peer writes
}

error_code connection_impl::prepare_credits() {
  if (!device_->iwarp)
    return {};
  // The word the peer writes, then one source per report in flight.
  if (auto ec = credit_block_.allocate(pd(), 1 + report_slots, sizeof(std::uint64_t),
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
    return ec;
  std::memset(credit_block_.slot(0), 0, (1 + report_slots) * sizeof(std::uint64_t));
  report_target_.owner = this;
  report_target_.on_complete = &connection_impl::on_report_complete;
  return {};
}

std::span<const std::byte> connection_impl::private_data_to_send() {
  const std::span<const std::byte> user(options_.private_data);
  if (!credit_block_.mr)
    return user;
  credit_offer offer;
  offer.receive_depth = shared_ ? 0 : receives_->depth();
  offer.rkey = credit_block_.mr->rkey;
  offer.address = reinterpret_cast<std::uintptr_t>(credit_block_.slot(peer_word_slot));
  return std::span(offer_data_).first(append_offer(offer_data_, user, offer));
}

void connection_impl::take_peer_private_data(std::span<const std::byte> data) {
  std::optional<credit_offer> offer;
  if (credit_block_.mr)
    offer = take_offer(data);
  peer_private_data_.assign(data.begin(), data.end());
  if (!offer)
    return; // a peer that does not count: it is not limited, nor reported to
  if (offer->receive_depth > 0)
    sends_.limit_by_credits(offer->receive_depth);
  if (!shared_) {
    reports_credits_ = true;
    peer_word_address_ = offer->address;
    peer_word_rkey_ = offer->rkey;
    reporter_.start(receives_->depth());
  }
}

void connection_impl::refresh_credits() {
  // Called only while credits limit the sends (post_sends asks). The peer's RDMA write
  // lands while we run: one atomic load, checked (credit_word).
  const auto* word = reinterpret_cast<const std::uint64_t*>(credit_block_.slot(peer_word_slot));
  if (auto posted = posted_in(__atomic_load_n(word, __ATOMIC_ACQUIRE)))
    sends_.peer_posted(*posted);
}

void connection_impl::wait_for_credits() {
  // No completion of ours is coming to look at the word again: look after the pause a
  // sender takes on RNR elsewhere.
  if (credit_timer_armed_)
    return;
  credit_timer_armed_ = true;
  credit_timer_.expires_after(options_.rnr_retry_delay);
  credit_timer_.async_wait([weak = weak_from_this()](const error_code& ec) {
    auto self = weak.lock();
    if (!self)
      return;
    self->credit_timer_armed_ = false;
    if (!ec && self->state_ == state::open)
      self->post_queued();
  });
}

void connection_impl::report_credits() {
  if (!reports_credits_ || state_ != state::open || reports_in_flight_ == report_slots ||
      !reporter_.should_report())
    return;
  // A source of its own per report in flight: the device may read it until it completes.
  auto* source = reinterpret_cast<std::uint64_t*>(credit_block_.slot(1 + next_report_slot_));
  next_report_slot_ = (next_report_slot_ + 1) % report_slots;
  *source = credit_word(reporter_.report());
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(source), sizeof *source, credit_block_.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = report_target_.wr_id();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peer_word_address_;
  wr.wr.rdma.rkey = peer_word_rkey_;
  ibv_send_wr* bad = nullptr;
  if (int rc = ::ibv_post_send(qp_, &wr, &bad))
    return begin_close(from_returned_errno(rc));
  ++reports_in_flight_;
}

void connection_impl::on_report_complete(completion_target* target, const ibv_wc& wc, from) {
  connection_impl* self = static_cast<report_target*>(target)->owner;
  if (self->state_ == state::closed)
    return; // flushed after the close, which counted it gone
  --self->reports_in_flight_;
  ++self->completions_;
  if (wc.status == IBV_WC_SUCCESS)
    self->report_credits(); // one held back while both sources were in flight
  else if (self->state_ == state::open)
    // Our own write failed: the connection is going down under us (siw: LOC_QP_OP_ERR
    // when the peer's TCP connection breaks). The CM's event, or the grace period after
    // it, says how: the report's status would only mislead.
    self->queue_pair_failed();
  self->maybe_finish_close();
}

} // namespace asio_rdma::detail
