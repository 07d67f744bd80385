// HMAC-SHA256 challenge-response with OpenSSL's libcrypto (see authentication.hpp).
#include "authentication.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

namespace asio_rdma::detail {

namespace proto = file_protocol;

namespace {
/// Binds a proof to this protocol, so an HMAC of the same secret made for
/// anything else cannot be replayed here.
constexpr char label[] = "asio-rdma file transfer v1 proof";
} // namespace

proto::challenge make_challenge(error_code& ec) noexcept {
  ec = {};
  proto::challenge c;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(c.nonce.data()),
                 static_cast<int>(c.nonce.size())) != 1)
    ec = error_code(EIO, boost::system::system_category());
  return c;
}

proto::proof make_proof(std::string_view secret, const proto::challenge& c) noexcept {
  unsigned char input[sizeof(label) - 1 + proto::nonce_size];
  std::memcpy(input, label, sizeof(label) - 1);
  std::memcpy(input + sizeof(label) - 1, c.nonce.data(), c.nonce.size());
  proto::proof p;
  unsigned int length = 0;
  static const unsigned char empty = 0;
  const void* key = secret.empty() ? static_cast<const void*>(&empty) : secret.data();
  HMAC(EVP_sha256(), key, static_cast<int>(secret.size()), input, sizeof(input),
       reinterpret_cast<unsigned char*>(p.mac.data()), &length);
  return p;
}

bool check_proof(std::string_view secret, const proto::challenge& c,
                 const proto::proof& p) noexcept {
  auto expected = make_proof(secret, c);
  return CRYPTO_memcmp(expected.mac.data(), p.mac.data(), p.mac.size()) == 0;
}

} // namespace asio_rdma::detail
