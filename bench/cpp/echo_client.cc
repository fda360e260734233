// echo_client (gRPC C++): the reference side of the client benchmark,
// calling /bench.Echo/Unary with gRPC's callback API (stub->async()).
//
//   echo_client --target HOST:PORT [--concurrency N] [--connections C]
//               [--duration S] [--warmup S] [--size B] [--rate R]
//               [--use_tls [--tls_ca FILE] [--server_host_override NAME]]
//   echo_client --target HOST:PORT --bulk upload|download --total BYTES
//               --size B [--timeout S] [--use_tls ...]
//
// The same flags, behaviour and output as bench/echo_client.c (the sluice
// client), so the two compare on the same server:
// - --connections C: C channels, each with distinct channel arguments
//   (grpc.channel_id = i, and GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL) so they
//   do not share a subchannel: exactly C TCP connections.
// - Closed loop (default): N calls outstanding; each completion callback
//   starts the next call of its slot (slots spread round robin over the
//   channels). Each slot keeps its own samples (one call at a time per
//   slot), merged at the end: no lock on the measured path.
// - Open loop (--rate R): a scheduler thread starts calls at their
//   intended times (it sleeps until the next one, at least 50 us: at high
//   rates calls start in small bursts up to ~50 us late, which counts in
//   their latency, as in the sluice client), latency from the intended time;
//   more than 100000 outstanding -> "missed".
// Output: one JSON line on stdout; exact percentiles of every call that
// completed in the measured window (after --warmup).
//
// Bulk mode (--bulk), as the sluice client's: one Upload (client streaming,
// a ClientWriteReactor: one write in flight, the next from OnWriteDone) or
// Download (server streaming, a ClientReadReactor) call of --total payload
// bytes in messages of --size bytes, after an empty unary call that brings
// the connection up; timed from the start of the call to OnDone; bounded by
// --timeout (the call's deadline, default 120 s). One JSON line, the keys of
// the sluice client's: client, mode, size, total, bytes, messages, seconds,
// mb_per_s (MB = 10^6 bytes), errors.
//
// --use_tls: grpc::SslCredentials, trusting --tls_ca (default: gRPC's
// roots); --server_host_override NAME: the name to check the server's
// certificate against (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG).
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "echo.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned kMaxOutstanding = 100000;
constexpr int kCallTimeoutMs = 10000;
constexpr uint64_t kMinWakeNs = 50000;

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          Clock::now().time_since_epoch())
          .count());
}

struct Samples {
  std::vector<uint64_t> lat_ns;
  uint64_t errors = 0;
  std::string first_error;
};

class Bench {
public:
  Bench(std::vector<std::unique_ptr<bench::Echo::Stub>> stubs, size_t size,
        double rate)
      : stubs_(std::move(stubs)), size_(size), rate_(rate) {
    req_.set_payload(std::string(size, 'x'));
  }

  void RunClosed(unsigned concurrency, uint64_t warm_end, uint64_t end) {
    warm_end_ = warm_end;
    end_ = end;
    slots_.reserve(concurrency);
    for (unsigned i = 0; i < concurrency; i++)
      slots_.push_back(
          std::make_unique<Slot>(this, stubs_[i % stubs_.size()].get()));
    outstanding_ = concurrency;
    for (auto &s : slots_)
      s->Start();
    Wait();
    for (auto &s : slots_)
      Merge(s->samples);
  }

  void RunOpen(uint64_t t0, uint64_t warm_end, uint64_t end) {
    warm_end_ = warm_end;
    end_ = end;
    outstanding_ = 1; // the scheduler's own reference
    uint64_t scheduled = 0;
    size_t next = 0;
    for (;;) {
      uint64_t now = NowNs();
      if (now >= end)
        break;
      // Call k is intended at t0 + k / rate.
      uint64_t due =
          static_cast<uint64_t>(static_cast<double>(now - t0) * 1e-9 * rate_) +
          1;
      while (scheduled < due) {
        uint64_t intended =
            t0 +
            static_cast<uint64_t>(static_cast<double>(scheduled) * 1e9 / rate_);
        scheduled++;
        if (outstanding_.load(std::memory_order_relaxed) > kMaxOutstanding) {
          if (intended >= warm_end)
            missed_++;
          continue;
        }
        auto *call = new OpenCall(this, intended);
        outstanding_.fetch_add(1, std::memory_order_relaxed);
        call->Start(stubs_[next].get());
        next = (next + 1) % stubs_.size();
      }
      // Sleep until the next intended start, at least kMinWakeNs.
      uint64_t next = t0 + static_cast<uint64_t>(
                               static_cast<double>(scheduled) * 1e9 / rate_);
      uint64_t after = NowNs() + kMinWakeNs;
      std::this_thread::sleep_until(
          Clock::time_point(std::chrono::nanoseconds(std::max(next, after))));
    }
    Release();
    Wait();
    Merge(open_samples_);
  }

  Samples &result() { return total_; }
  uint64_t missed() const { return missed_; }

private:
  // Records one completed call into s.
  void Record(Samples *s, uint64_t start, uint64_t now, const grpc::Status &st,
              const bench::EchoMsg &resp) {
    if (start < warm_end_ || now > end_)
      return;
    if (st.ok() && resp.payload().size() == size_) {
      s->lat_ns.push_back(now - start);
    } else if (s->errors++ == 0) {
      s->first_error =
          st.ok() ? std::string("OK: wrong payload size")
                  : std::to_string(st.error_code()) + ": " + st.error_message();
    }
  }

  void Release() {
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
      cv_.notify_all();
    }
  }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return done_; });
  }
  void Merge(Samples &s) {
    total_.lat_ns.insert(total_.lat_ns.end(), s.lat_ns.begin(), s.lat_ns.end());
    if (total_.errors == 0 && s.errors > 0)
      total_.first_error = s.first_error;
    total_.errors += s.errors;
  }

  void SetDeadline(grpc::ClientContext *ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(kCallTimeoutMs));
  }

  // Closed loop: one call at a time, restarted from its own callback.
  struct Slot {
    Slot(Bench *b, bench::Echo::Stub *stub) : b(b), stub(stub) {}
    void Start() {
      ctx = std::make_unique<grpc::ClientContext>();
      b->SetDeadline(ctx.get());
      resp.Clear();
      start = NowNs();
      stub->async()->Unary(ctx.get(), &b->req_, &resp,
                           [this](grpc::Status st) { Done(st); });
    }
    void Done(const grpc::Status &st) {
      uint64_t now = NowNs();
      b->Record(&samples, start, now, st, resp);
      if (now < b->end_) {
        Start();
        return;
      }
      b->Release();
    }
    Bench *b;
    bench::Echo::Stub *stub;
    std::unique_ptr<grpc::ClientContext> ctx;
    bench::EchoMsg resp;
    uint64_t start = 0;
    Samples samples;
  };

  // Open loop: one object per call; completions from any gRPC thread.
  struct OpenCall {
    OpenCall(Bench *b, uint64_t intended) : b(b), intended(intended) {}
    void Start(bench::Echo::Stub *stub) {
      b->SetDeadline(&ctx);
      stub->async()->Unary(&ctx, &b->req_, &resp,
                           [this](grpc::Status st) { Done(st); });
    }
    void Done(const grpc::Status &st) {
      uint64_t now = NowNs();
      {
        std::lock_guard<std::mutex> lk(b->open_mu_);
        b->Record(&b->open_samples_, intended, now, st, resp);
      }
      Bench *bb = b;
      delete this;
      bb->Release();
    }
    Bench *b;
    uint64_t intended;
    grpc::ClientContext ctx;
    bench::EchoMsg resp;
  };

  std::vector<std::unique_ptr<bench::Echo::Stub>> stubs_;
  bench::EchoMsg req_; // shared, read-only while calls run
  size_t size_;
  double rate_;
  uint64_t warm_end_ = 0, end_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<unsigned> outstanding_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::mutex open_mu_;
  Samples open_samples_;
  Samples total_;
  uint64_t missed_ = 0;
};

double PctUs(const std::vector<uint64_t> &v, double q) {
  if (v.empty())
    return 0;
  size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  if (i > 0)
    i--;
  if (i >= v.size())
    i = v.size() - 1;
  return static_cast<double>(v[i]) / 1000.0;
}

// ---- bulk mode

constexpr uint32_t kBulkMaxSize = (4u << 20) - 64u; // gRPC's limit, framed

struct BulkResult {
  uint64_t bytes = 0, messages = 0;
  uint64_t t0 = 0, t1 = 0;
  grpc::Status status;
};

// Waits for OnDone.
class BulkWait {
public:
  void Done() {
    std::lock_guard<std::mutex> lk(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return done_; });
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

class Uploader final : public grpc::ClientWriteReactor<bench::EchoMsg>,
                       public BulkWait {
public:
  Uploader(bench::Echo::Stub *stub, uint64_t total, size_t size,
           std::chrono::milliseconds timeout, BulkResult *r)
      : total_(total), size_(size), r_(r) {
    ctx_.set_deadline(std::chrono::system_clock::now() + timeout);
    msg_.set_payload(std::string(size, 'x'));
    r_->t0 = NowNs();
    stub->async()->Upload(&ctx_, &resp_, this);
    Next();
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) // else the call failed: OnDone says how
      Next();
  }
  void OnDone(const grpc::Status &st) override {
    r_->t1 = NowNs();
    r_->status = st;
    r_->bytes = resp_.bytes();
    r_->messages = resp_.messages();
    Done();
  }

private:
  void Next() {
    if (sent_ >= total_) {
      StartWritesDone();
      return;
    }
    uint64_t left = total_ - sent_;
    if (left < size_)
      msg_.mutable_payload()->resize(static_cast<size_t>(left));
    sent_ += msg_.payload().size();
    StartWrite(&msg_);
  }

  grpc::ClientContext ctx_;
  bench::EchoMsg msg_;
  bench::BulkCount resp_;
  uint64_t total_, sent_ = 0;
  size_t size_;
  BulkResult *r_;
};

class Downloader final : public grpc::ClientReadReactor<bench::EchoMsg>,
                         public BulkWait {
public:
  Downloader(bench::Echo::Stub *stub, uint64_t total, size_t size,
             std::chrono::milliseconds timeout, BulkResult *r)
      : r_(r) {
    ctx_.set_deadline(std::chrono::system_clock::now() + timeout);
    req_.set_total(total);
    req_.set_size(static_cast<uint32_t>(size));
    r_->t0 = NowNs();
    stub->async()->Download(&ctx_, &req_, this);
    StartRead(&msg_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) // the end of the stream (or a failure): OnDone follows
      return;
    r_->bytes += msg_.payload().size();
    r_->messages++;
    StartRead(&msg_);
  }
  void OnDone(const grpc::Status &st) override {
    r_->t1 = NowNs();
    r_->status = st;
    Done();
  }

private:
  grpc::ClientContext ctx_;
  bench::BulkRequest req_;
  bench::EchoMsg msg_;
  BulkResult *r_;
};

int RunBulk(const char *prog, bench::Echo::Stub *stub, bool upload,
            uint64_t total, size_t size, double timeout_s) {
  BulkResult r;
  // An empty unary call first: the connection (and TLS) is up before the
  // clock starts.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(kCallTimeoutMs));
    bench::EchoMsg empty, resp;
    grpc::Status st = stub->Unary(&ctx, empty, &resp);
    if (!st.ok())
      r.status = st;
  }
  auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (r.status.ok()) {
    if (upload) {
      Uploader u(stub, total, size, timeout, &r);
      u.Wait();
    } else {
      Downloader d(stub, total, size, timeout, &r);
      d.Wait();
    }
  }
  bool failed = !r.status.ok() || r.bytes != total;
  double secs = r.t1 > r.t0 ? static_cast<double>(r.t1 - r.t0) * 1e-9 : 0;
  std::printf("{\"client\":\"grpc++\",\"mode\":\"%s\",\"size\":%zu,"
              "\"total\":%llu,\"bytes\":%llu,\"messages\":%llu,"
              "\"seconds\":%.3f,\"mb_per_s\":%.1f,\"errors\":%d}\n",
              upload ? "upload" : "download", size,
              static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(r.bytes),
              static_cast<unsigned long long>(r.messages), secs,
              secs > 0 && !failed ? static_cast<double>(r.bytes) / secs / 1e6
                                  : 0.0,
              failed ? 1 : 0);
  std::fflush(stdout);
  if (failed)
    std::fprintf(stderr, "%s: bulk %s failed: %d: %s\n", prog,
                 upload ? "upload" : "download", r.status.error_code(),
                 r.status.ok() ? "the receiver counted a different number of "
                                 "bytes"
                               : r.status.error_message().c_str());
  return failed ? 1 : 0;
}

bool ReadFile(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

void Usage(FILE *f, const char *prog) {
  std::fprintf(
      f,
      "usage: %s --target HOST:PORT [--concurrency N] [--connections C]\n"
      "          [--duration S] [--warmup S] [--size B] [--rate R]\n"
      "          [--use_tls [--tls_ca FILE] [--server_host_override NAME]]\n"
      "       %s --target HOST:PORT --bulk upload|download --total BYTES\n"
      "          --size B [--timeout S] [--use_tls ...]\n"
      "  --target HOST:PORT  the bench.Echo server\n"
      "  --concurrency N     calls outstanding, closed loop (default 64)\n"
      "  --connections C     channels = TCP connections (default 1)\n"
      "  --duration S        measured seconds (default 5)\n"
      "  --warmup S          seconds before measuring (default 0.5)\n"
      "  --size B            payload bytes (default 64; bulk: per message, "
      "1 .. 4 MiB - 64)\n"
      "  --rate R            open loop: R calls/s in total\n"
      "  --bulk upload|download  one Upload (client streaming) or Download\n"
      "                      (server streaming) call of --total payload bytes\n"
      "  --total BYTES       bulk: payload bytes in all (default 256 MiB)\n"
      "  --timeout S         bulk: the call's deadline (default 120)\n"
      "  --use_tls           call over TLS\n"
      "  --tls_ca FILE       CA certificates to trust (PEM; default: gRPC's "
      "roots)\n"
      "  --server_host_override NAME  name to verify the server's "
      "certificate\n"
      "                      against (default: the target's host)\n",
      prog, prog);
}

bool ParseDouble(const char *s, double min, double max, double *out) {
  if (s == nullptr || *s == '\0')
    return false;
  char *end;
  errno = 0;
  double v = std::strtod(s, &end);
  if (*end != '\0' || errno != 0 || !(v >= min && v <= max))
    return false;
  *out = v;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  const char *prog = argv[0];
  std::string target, bulk_mode, tls_ca, host_override;
  bool use_tls = false, size_given = false;
  double concurrency = 64, connections = 1, duration = 5, warmup = 0.5,
         size = 64, rate = 0, total = 256.0 * 1024 * 1024, timeout = 120;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      Usage(stdout, prog);
      return 0;
    }
    if (flag == "--use_tls") {
      use_tls = true;
      continue;
    }
    const char *val = i + 1 < argc ? argv[++i] : nullptr;
    bool ok;
    if (flag == "--target") {
      ok = val != nullptr && *val != '\0';
      if (ok)
        target = val;
    } else if (flag == "--concurrency") {
      ok = ParseDouble(val, 1, kMaxOutstanding, &concurrency);
    } else if (flag == "--connections") {
      ok = ParseDouble(val, 1, 1024, &connections);
    } else if (flag == "--duration") {
      ok = ParseDouble(val, 0.01, 3600, &duration);
    } else if (flag == "--warmup") {
      ok = ParseDouble(val, 0, 3600, &warmup);
    } else if (flag == "--size") {
      ok = ParseDouble(val, 0, 4 << 20, &size);
      size_given = true;
    } else if (flag == "--rate") {
      ok = ParseDouble(val, 0, 1e8, &rate);
    } else if (flag == "--bulk") {
      ok = val != nullptr &&
           (std::string(val) == "upload" || std::string(val) == "download");
      if (ok)
        bulk_mode = val;
    } else if (flag == "--total") {
      ok = ParseDouble(val, 1, 1e12, &total);
    } else if (flag == "--timeout") {
      ok = ParseDouble(val, 0.01, 3600, &timeout);
    } else if (flag == "--tls_ca" || flag == "--server_host_override") {
      ok = val != nullptr && *val != '\0';
      if (ok)
        (flag == "--tls_ca" ? tls_ca : host_override) = val;
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
  if (target.empty()) {
    std::fprintf(stderr, "%s: --target is required\n", prog);
    Usage(stderr, prog);
    return 2;
  }
  if (!use_tls && (!tls_ca.empty() || !host_override.empty())) {
    std::fprintf(stderr,
                 "%s: --tls_ca and --server_host_override need --use_tls\n",
                 prog);
    return 2;
  }
  if (!bulk_mode.empty() &&
      (!size_given || size < 1 || size > kBulkMaxSize ||
       size != std::floor(size) || total != std::floor(total))) {
    std::fprintf(stderr, "%s: --bulk needs --size 1 .. %u and whole numbers\n",
                 prog, kBulkMaxSize);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::InsecureChannelCredentials();
  if (use_tls) {
    grpc::SslCredentialsOptions ssl;
    if (!tls_ca.empty() && !ReadFile(tls_ca, &ssl.pem_root_certs)) {
      std::fprintf(stderr, "%s: cannot read %s\n", prog, tls_ca.c_str());
      return 2;
    }
    creds = grpc::SslCredentials(ssl);
  }
  if (!bulk_mode.empty())
    connections = 1;

  unsigned n_conn = static_cast<unsigned>(connections);
  std::vector<std::unique_ptr<bench::Echo::Stub>> stubs;
  for (unsigned i = 0; i < n_conn; i++) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", static_cast<int>(i));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (!host_override.empty())
      args.SetSslTargetNameOverride(host_override);
    auto ch = grpc::CreateCustomChannel(target, creds, args);
    // Connect before the clock starts (the warm-up is not measured either).
    ch->WaitForConnected(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    stubs.push_back(bench::Echo::NewStub(ch));
  }
  if (!bulk_mode.empty())
    return RunBulk(prog, stubs[0].get(), bulk_mode == "upload",
                   static_cast<uint64_t>(total), static_cast<size_t>(size),
                   timeout);

  Bench b(std::move(stubs), static_cast<size_t>(size), rate);
  uint64_t t0 = NowNs();
  uint64_t warm_end = t0 + static_cast<uint64_t>(warmup * 1e9);
  uint64_t end = warm_end + static_cast<uint64_t>(duration * 1e9);
  if (rate > 0)
    b.RunOpen(t0, warm_end, end);
  else
    b.RunClosed(static_cast<unsigned>(concurrency), warm_end, end);

  Samples &r = b.result();
  std::sort(r.lat_ns.begin(), r.lat_ns.end());
  std::printf(
      "{\"client\":\"grpc++\",\"mode\":\"%s\",\"concurrency\":%u,"
      "\"connections\":%u,\"size\":%zu,\"rate\":%.0f,\"duration_s\":%.2f,"
      "\"calls\":%zu,\"errors\":%llu,\"missed\":%llu,"
      "\"calls_per_s\":%.0f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
      "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}\n",
      rate > 0 ? "open" : "closed",
      rate > 0 ? 0u : static_cast<unsigned>(concurrency), n_conn,
      static_cast<size_t>(size), rate, duration, r.lat_ns.size(),
      static_cast<unsigned long long>(r.errors),
      static_cast<unsigned long long>(b.missed()),
      static_cast<double>(r.lat_ns.size()) / duration, PctUs(r.lat_ns, 0.50),
      PctUs(r.lat_ns, 0.90), PctUs(r.lat_ns, 0.99), PctUs(r.lat_ns, 0.999),
      r.lat_ns.empty() ? 0.0 : static_cast<double>(r.lat_ns.back()) / 1000.0);
  std::fflush(stdout);
  if (r.errors > 0)
    std::fprintf(stderr, "%s: %llu errors; first: %s\n", prog,
                 static_cast<unsigned long long>(r.errors),
                 r.first_error.c_str());
  return !r.lat_ns.empty() && r.errors == 0 ? 0 : 1;
}
