// rdma_bench --raw-verbs --asio-floor (--op send --mode lat, busy polling, both ends): the
// raw-verbs ping-pong with each step awaited through Asio's use_awaitable, and nothing of
// asio_rdma in between. Each end is a coroutine on an io_context that co_awaits its send
// (posted at once, inline; its handler runs when the poll turn that started it ends) and
// the next message (its handler runs from the poll that finds it), while a posted task
// polls the completion queue 256 times a turn (--completion busy), or the io_context's
// reactor waits for the completion channel and the CQ is polled after each event
// (--completion event): the library's own shape, with none of its bookkeeping. Its time above --raw-verbs is what any library built on Asio coroutines
// pays at least per round trip (two suspensions and resumptions, the handlers, the
// scheduler's turns): the floor under issue 29's latency goal.
#pragma once

#include "raw_common.hpp"
#include "results.hpp"

#include <cstdint>
#include <functional>

namespace rdma_bench {
struct settings;
}

namespace rdma_bench::raw {

/// The client's ping-pong of `size`-byte messages over `ep` (connected, 16 receives
/// posted on slot 0 of its buffer), measured as the raw-verbs client measures it.
result awaited_latency(const settings& s, endpoint& ep, std::size_t size);

/// The server's side: answers each message of `size` bytes with one of its own until
/// the client has gone (a flushed completion, or `client_left()`, asked now and then
/// while nothing arrives when busy, and when `cm_fd`, the CM event channel, is readable
/// with events).
void awaited_echo(endpoint& ep, std::uint32_t size, const std::function<bool()>& client_left,
                  int cm_fd);

} // namespace rdma_bench::raw
