// echo_server (gRPC C++): the reference side of the benchmarks, serving
// bench.Echo with gRPC's callback API.
//
//   echo_server [--port N] [--host H] [--threads T]
//               [--tls_cert FILE --tls_key FILE]
//
// Unary: a default reactor (ServerUnaryReactor); the response takes over
// the request's payload (a swap, no copy) and the call finishes at once.
// Bidi: a ServerBidiReactor that reads one message and writes it back
// (the same object), then reads the next: gRPC allows one write in flight
// per call, so this is its flow control.
//
// Upload: a ServerReadReactor that counts the payload bytes and messages
// and answers with the totals when the client half-closes. Download: a
// ServerWriteReactor that writes BulkRequest.total payload bytes in
// messages of BulkRequest.size bytes (one write in flight, the next from
// OnWriteDone), then finishes.
//
// --threads T is passed as a hint: ResourceQuota::SetMaxThreads(T). The
// callback API runs handlers on gRPC's own threads, which that quota does
// not bound; for a fixed number of cores pin the process (taskset), as
// bench/run_compare.sh does.
//
// Prints "listening on <port>" on stdout once it accepts (port 0 picks a
// free one). SIGINT or SIGTERM shut it down gracefully (2 s drain).
#include <fstream>
#include <sstream>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "echo.grpc.pb.h"

namespace {

class BidiEcho final
    : public grpc::ServerBidiReactor<bench::EchoMsg, bench::EchoMsg> {
public:
  BidiEcho() { StartRead(&msg_); }

  void OnReadDone(bool ok) override {
    if (!ok) { // the client half-closed (or went away)
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&msg_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    StartRead(&msg_);
  }
  void OnDone() override { delete this; }

private:
  bench::EchoMsg msg_;
};

class UploadCount final : public grpc::ServerReadReactor<bench::EchoMsg> {
public:
  explicit UploadCount(bench::BulkCount *resp) : resp_(resp) {
    StartRead(&msg_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) { // the client half-closed (or went away)
      resp_->set_bytes(bytes_);
      resp_->set_messages(messages_);
      Finish(grpc::Status::OK);
      return;
    }
    bytes_ += msg_.payload().size();
    messages_++;
    StartRead(&msg_);
  }
  void OnDone() override { delete this; }

private:
  bench::BulkCount *resp_;
  bench::EchoMsg msg_;
  uint64_t bytes_ = 0, messages_ = 0;
};

constexpr uint32_t kBulkMaxSize = (4u << 20) - 64u; // gRPC's limit, framed

class DownloadStream final : public grpc::ServerWriteReactor<bench::EchoMsg> {
public:
  explicit DownloadStream(const bench::BulkRequest *req)
      : left_(req->total()), size_(req->size()) {
    if (size_ == 0 || size_ > kBulkMaxSize) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "size must be 1 .. 4 MiB - 64"));
      return;
    }
    msg_.set_payload(std::string(size_, 'x'));
    Next();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

private:
  void Next() {
    if (left_ == 0) {
      Finish(grpc::Status::OK);
      return;
    }
    if (left_ < size_)
      msg_.mutable_payload()->resize(static_cast<size_t>(left_));
    left_ -= msg_.payload().size();
    StartWrite(&msg_);
  }

  uint64_t left_;
  uint32_t size_;
  bench::EchoMsg msg_;
};

class EchoService final : public bench::Echo::CallbackService {
  grpc::ServerUnaryReactor *Unary(grpc::CallbackServerContext *ctx,
                                  const bench::EchoMsg *req,
                                  bench::EchoMsg *resp) override {
    // The request is ours until the call is finished and is never read
    // again: moving its payload avoids a copy, as sluice's server does.
    resp->mutable_payload()->swap(
        *const_cast<bench::EchoMsg *>(req)->mutable_payload());
    grpc::ServerUnaryReactor *r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerBidiReactor<bench::EchoMsg, bench::EchoMsg> *
  Bidi(grpc::CallbackServerContext *) override {
    return new BidiEcho();
  }

  grpc::ServerReadReactor<bench::EchoMsg> *
  Upload(grpc::CallbackServerContext *, bench::BulkCount *resp) override {
    return new UploadCount(resp);
  }

  grpc::ServerWriteReactor<bench::EchoMsg> *
  Download(grpc::CallbackServerContext *,
           const bench::BulkRequest *req) override {
    return new DownloadStream(req);
  }
};

void Usage(FILE *f, const char *prog) {
  std::fprintf(f,
               "usage: %s [--port N] [--host H] [--threads T]\n"
               "          [--tls_cert FILE --tls_key FILE]\n"
               "  --port N     port to listen on (default 50051; 0 picks a "
               "free one)\n"
               "  --host H     address to listen on (default 127.0.0.1)\n"
               "  --threads T  thread hint (ResourceQuota max threads)\n"
               "  --tls_cert FILE, --tls_key FILE  TLS only (PEM)\n",
               prog);
}

bool ParseUint(const char *s, unsigned long max, unsigned long *out) {
  if (s == nullptr || *s == '\0' || *s == '-')
    return false;
  char *end;
  errno = 0;
  unsigned long v = std::strtoul(s, &end, 10);
  if (*end != '\0' || errno != 0 || v > max)
    return false;
  *out = v;
  return true;
}

} // namespace

// The whole of a file into *out; false if it cannot be read.
bool ReadFile(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

int main(int argc, char **argv) {
  const char *prog = argv[0];
  std::string host = "127.0.0.1", tls_cert, tls_key;
  unsigned long port = 50051, threads = 0;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      Usage(stdout, prog);
      return 0;
    }
    const char *val = i + 1 < argc ? argv[++i] : nullptr;
    bool ok;
    if (flag == "--port") {
      ok = ParseUint(val, 65535, &port);
    } else if (flag == "--threads") {
      ok = ParseUint(val, 1024, &threads);
    } else if (flag == "--host") {
      ok = val != nullptr && *val != '\0';
      if (ok)
        host = val;
    } else if (flag == "--tls_cert" || flag == "--tls_key") {
      ok = val != nullptr && *val != '\0';
      if (ok)
        (flag == "--tls_cert" ? tls_cert : tls_key) = val;
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", prog, flag.c_str());
      Usage(stderr, prog);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: %s needs a valid value\n", prog, flag.c_str());
      Usage(stderr, prog);
      return 2;
    }
  }

  // Blocked before gRPC starts its threads, so they all inherit the mask
  // and sigwait() below takes the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string address =
      (host.find(':') != std::string::npos && host[0] != '[' ? "[" + host + "]"
                                                             : host) +
      ":" + std::to_string(port);
  EchoService service;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::InsecureServerCredentials();
  if (!tls_cert.empty() || !tls_key.empty()) {
    std::string cert, key;
    if (!ReadFile(tls_cert, &cert) || !ReadFile(tls_key, &key)) {
      std::fprintf(stderr, "%s: cannot read --tls_cert / --tls_key\n", prog);
      return 2;
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(address, creds, &bound_port);
  builder.RegisterService(&service);
  if (threads > 0) {
    grpc::ResourceQuota quota("echo_server");
    quota.SetMaxThreads(static_cast<int>(threads));
    builder.SetResourceQuota(quota);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "%s: cannot listen on %s\n", prog, address.c_str());
    return 1;
  }
  std::printf("listening on %d\n", bound_port);
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::fprintf(stderr, "%s: %s, shutting down\n", prog,
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return 0;
}
