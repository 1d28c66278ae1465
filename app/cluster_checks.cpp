// Checks of the cluster settings (see cluster_checks.hpp).

#include "cluster_checks.hpp"

#include "quarry/core/cluster.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <filesystem>
#include <memory>
#include <string>

namespace quarry::app {

namespace {

std::string openssl_reason() {
  auto code = ERR_get_error();
  ERR_clear_error();
  if (code == 0)
    return "not valid PEM";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

/// Why `path` cannot be used as a PEM file, or empty.
std::string file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return "no such file: " + path;
  if (!fs::is_regular_file(st))
    return "not a regular file: " + path;
  return {};
}

struct bio_deleter {
  void operator()(BIO* b) const {
    BIO_free(b);
  }
};
struct x509_deleter {
  void operator()(X509* x) const {
    X509_free(x);
  }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const {
    EVP_PKEY_free(k);
  }
};
struct store_deleter {
  void operator()(X509_STORE* s) const {
    X509_STORE_free(s);
  }
};
struct store_ctx_deleter {
  void operator()(X509_STORE_CTX* s) const {
    X509_STORE_CTX_free(s);
  }
};

std::unique_ptr<X509, x509_deleter> read_cert(const std::string& path) {
  std::unique_ptr<BIO, bio_deleter> bio{BIO_new_file(path.c_str(), "r")};
  if (!bio)
    return nullptr;
  return std::unique_ptr<X509, x509_deleter>{
    PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
}

} // namespace

std::vector<core::config_error> check_cluster_settings(const core::settings& cfg) {
  std::vector<core::config_error> out;
  auto add = [&](std::string key, std::string message) {
    core::config_error e;
    e.key = std::move(key);
    e.message = std::move(message);
    out.push_back(std::move(e));
  };
  const auto& cl = cfg.cluster;
  for (const auto& w : cl.workers) {
    auto a = core::parse_node_address(w);
    if (!a || a->port == 0)
      add("cluster.workers", "not HOST:PORT with a port from 1 to 65535: '" + w + "'");
  }
  if (!cl.listen.empty() && !core::parse_node_address(cl.listen))
    add("cluster.listen", "not HOST:PORT: '" + cl.listen + "'");
  if (cl.heartbeat >= cl.heartbeat_timeout)
    add("cluster.heartbeat_timeout",
        "must be longer than cluster.heartbeat, or every worker is lost between two "
        "heartbeats");
  const auto& tls = cl.tls;
  if (!tls.configured())
    return out;
  auto missing = false;
  for (auto [key, value] :
       {std::pair{"cluster.tls.cert", &tls.cert}, std::pair{"cluster.tls.key", &tls.key},
        std::pair{"cluster.tls.ca", &tls.ca}}) {
    if (value->empty()) {
      add(key, "mutual TLS needs cluster.tls.cert, cluster.tls.key and cluster.tls.ca; "
               "this one is missing");
      missing = true;
    } else if (auto why = file_problem(*value); !why.empty()) {
      add(key, why);
      missing = true;
    }
  }
  if (missing)
    return out;
  ERR_clear_error();
  auto cert = read_cert(tls.cert);
  if (!cert) {
    add("cluster.tls.cert", "not a PEM certificate: " + tls.cert + " (" + openssl_reason() + ")");
    return out;
  }
  std::unique_ptr<EVP_PKEY, pkey_deleter> key;
  {
    std::unique_ptr<BIO, bio_deleter> bio{BIO_new_file(tls.key.c_str(), "r")};
    if (bio)
      key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  }
  if (!key) {
    add("cluster.tls.key",
        "not a PEM private key without a passphrase: " + tls.key + " (" + openssl_reason() + ")");
    return out;
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    add("cluster.tls.key", "the key does not belong to the certificate " + tls.cert);
    return out;
  }
  std::unique_ptr<X509_STORE, store_deleter> store{X509_STORE_new()};
  if (!store || X509_STORE_load_file(store.get(), tls.ca.c_str()) != 1) {
    add("cluster.tls.ca",
        "not a PEM certificate authority: " + tls.ca + " (" + openssl_reason() + ")");
    return out;
  }
  std::unique_ptr<X509_STORE_CTX, store_ctx_deleter> ctx{X509_STORE_CTX_new()};
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1
      || X509_verify_cert(ctx.get()) != 1) {
    auto reason = ctx ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()))
                      : "cannot verify";
    ERR_clear_error();
    add("cluster.tls.cert",
        "the certificate " + tls.cert + " is not signed by the CA " + tls.ca + " (" + reason + ")");
  }
  return out;
}

} // namespace quarry::app
