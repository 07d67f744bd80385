// The Asio ecosystem over asio_rdma::stream on a real device, unchanged: TLS 1.3 with
// asio::ssl::stream (a certificate made here with OpenSSL; a certificate the client does
// not trust is refused), Boost.Beast HTTP/1.1 (a request, a chunked response of 1 MiB)
// and a WebSocket echo.
#define BOOST_TEST_MODULE integration_stream_ecosystem
#include "stream_test_support.hpp"

#include <asio_rdma/stream.hpp>
#include <asio_rdma/stream_websocket.hpp>

#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace ar = asio_rdma;
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using ar::error_code;
using ar::test::make_streams;
using ar::test::run;
using ar::test::wait_until;
using asio::awaitable;
using asio::use_awaitable;

namespace {

/// A self-signed certificate for `name` and its key (P-256), in PEM.
struct certificate {
  std::string cert;
  std::string key;
};

std::string pem_of(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return s;
}

certificate make_certificate(const char* name) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> x(X509_new(), X509_free);
  BOOST_REQUIRE(key && x);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 3600);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* subject = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name), -1, -1, 0);
  X509_set_issuer_name(x.get(), subject);
  BOOST_REQUIRE(X509_sign(x.get(), key.get(), EVP_sha256()) > 0);
  BIO* cert_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_bio, x.get());
  BIO* key_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  return {pem_of(cert_bio), pem_of(key_bio)};
}

ssl::context server_context(const certificate& c) {
  ssl::context ctx(ssl::context::tls_server);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  ctx.use_certificate(asio::buffer(c.cert), ssl::context::pem);
  ctx.use_private_key(asio::buffer(c.key), ssl::context::pem);
  return ctx;
}

ssl::context client_context(const certificate& trusted, const char* host) {
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  ctx.add_certificate_authority(asio::buffer(trusted.cert));
  ctx.set_verify_mode(ssl::verify_peer);
  ctx.set_verify_callback(ssl::host_name_verification(host));
  return ctx;
}

} // namespace

BOOST_AUTO_TEST_CASE(tls_1_3_handshake_and_data_over_a_stream) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto cert = make_certificate("stream-test");
    auto sctx = server_context(cert);
    auto cctx = client_context(cert, "stream-test");
    auto s = co_await make_streams();
    ssl::stream<ar::stream&> server(s.server, sctx), client(s.client, cctx);
    auto ex = co_await asio::this_coro::executor;
    bool served = false;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          co_await server.async_handshake(ssl::stream_base::server, use_awaitable);
          std::string request(5, '\0');
          co_await asio::async_read(server, asio::buffer(request), use_awaitable);
          BOOST_TEST(request == "ping?");
          std::string answer(200000, 'p'); // many TLS records, many stream messages
          co_await asio::async_write(server, asio::buffer(answer), use_awaitable);
          served = true;
        },
        ar::test::report_failure);
    co_await client.async_handshake(ssl::stream_base::client, use_awaitable);
    BOOST_TEST(SSL_version(client.native_handle()) == TLS1_3_VERSION);
    co_await asio::async_write(client, asio::buffer(std::string("ping?")), use_awaitable);
    std::string answer(200000, '\0');
    co_await asio::async_read(client, asio::buffer(answer), use_awaitable);
    BOOST_TEST((answer == std::string(200000, 'p')));
    co_await wait_until(served);
  });
}

BOOST_AUTO_TEST_CASE(tls_refuses_a_certificate_the_client_does_not_trust) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto cert = make_certificate("stream-test");
    auto other = make_certificate("stream-test"); // same name, another key: not trusted
    auto sctx = server_context(cert);
    auto cctx = client_context(other, "stream-test");
    auto s = co_await make_streams();
    ssl::stream<ar::stream&> server(s.server, sctx), client(s.client, cctx);
    auto ex = co_await asio::this_coro::executor;
    bool server_done = false;
    error_code server_ec;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          auto [ec] = co_await server.async_handshake(ssl::stream_base::server,
                                                      asio::as_tuple(use_awaitable));
          server_ec = ec;
          server_done = true;
        },
        ar::test::report_failure);
    auto [ec] = co_await client.async_handshake(ssl::stream_base::client,
                                                asio::as_tuple(use_awaitable));
    BOOST_TEST(!!ec, "the client's handshake: " << ec.message());
    BOOST_TEST_MESSAGE("client: " << ec.message());
    // The client's alert reaches the server, whose handshake fails too.
    co_await wait_until(server_done);
    BOOST_TEST(!!server_ec, "the server's handshake: " << server_ec.message());
  });
}

BOOST_AUTO_TEST_CASE(beast_http_request_and_chunked_response) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto s = co_await make_streams();
    auto ex = co_await asio::this_coro::executor;
    const std::string big(1 << 20, 'b');
    bool served = false;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          // The same server code as over TCP: only the stream type differs.
          beast::flat_buffer buffer;
          for (int i = 0; i < 2; ++i) {
            http::request<http::string_body> req;
            co_await http::async_read(s.server, buffer, req, use_awaitable);
            http::response<http::string_body> res(http::status::ok, req.version());
            res.set(http::field::content_type, "text/plain");
            if (req.target() == "/big") {
              res.body() = big;
              res.chunked(true);
            } else {
              res.body() = "you asked for " + std::string(req.target()) + " with " +
                           std::to_string(req.body().size()) + " bytes";
              res.prepare_payload();
            }
            res.keep_alive(req.keep_alive());
            co_await http::async_write(s.server, res, use_awaitable);
          }
          served = true;
        },
        ar::test::report_failure);
    beast::flat_buffer buffer;
    http::request<http::string_body> req(http::verb::post, "/hello", 11);
    req.set(http::field::host, "rdma");
    req.body() = std::string(3000, 'x');
    req.prepare_payload();
    co_await http::async_write(s.client, req, use_awaitable);
    http::response<http::string_body> res;
    co_await http::async_read(s.client, buffer, res, use_awaitable);
    BOOST_TEST(res.result() == http::status::ok);
    BOOST_TEST(res.body() == "you asked for /hello with 3000 bytes");

    http::request<http::empty_body> get(http::verb::get, "/big", 11);
    get.set(http::field::host, "rdma");
    co_await http::async_write(s.client, get, use_awaitable);
    http::response<http::string_body> chunked;
    co_await http::async_read(s.client, buffer, chunked, use_awaitable);
    BOOST_TEST(chunked.chunked());
    BOOST_TEST((chunked.body() == big));
    co_await wait_until(served);
  });
}

BOOST_AUTO_TEST_CASE(beast_websocket_echo) {
  asio::io_context io;
  run(io, [&]() -> awaitable<void> {
    auto s = co_await make_streams();
    auto ex = co_await asio::this_coro::executor;
    websocket::stream<ar::stream&> server(s.server), client(s.client);
    bool served = false;
    asio::co_spawn(
        ex,
        [&]() -> awaitable<void> {
          co_await server.async_accept(use_awaitable);
          beast::flat_buffer buffer;
          for (;;) {
            auto [ec, n] = co_await server.async_read(buffer, asio::as_tuple(use_awaitable));
            if (ec == websocket::error::closed) {
              served = true;
              co_return;
            }
            BOOST_REQUIRE_MESSAGE(!ec, ec.message());
            server.text(server.got_text());
            co_await server.async_write(buffer.data(), use_awaitable);
            buffer.consume(n);
          }
        },
        ar::test::report_failure);
    co_await client.async_handshake("rdma", "/echo", use_awaitable);
    for (std::string text : {std::string("hello"), std::string(100000, 'w')}) {
      co_await client.async_write(asio::buffer(text), use_awaitable);
      beast::flat_buffer buffer;
      co_await client.async_read(buffer, use_awaitable);
      BOOST_TEST(beast::buffers_to_string(buffer.data()) == text);
    }
    co_await client.async_close(websocket::close_code::normal, use_awaitable);
    co_await wait_until(served);
  });
}
