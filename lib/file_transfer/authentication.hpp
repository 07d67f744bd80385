// The shared-secret challenge-response of the file transfer: the receiver
// sends a random nonce, the sender answers with HMAC-SHA256(secret, label ||
// nonce) (OpenSSL libcrypto). See docs/file_transfer.md.
#pragma once

#include "protocol.hpp"

#include <asio_rdma/error.hpp>

#include <string_view>

namespace asio_rdma::detail {

/// A challenge with a fresh random nonce (RAND_bytes); an error if the
/// random generator failed.
file_protocol::challenge make_challenge(error_code& ec) noexcept;

/// The sender's answer to `c`, proving it knows `secret`.
file_protocol::proof make_proof(std::string_view secret,
                                const file_protocol::challenge& c) noexcept;

/// Whether `p` answers `c` for `secret` (compared in constant time).
bool check_proof(std::string_view secret, const file_protocol::challenge& c,
                 const file_protocol::proof& p) noexcept;

} // namespace asio_rdma::detail
