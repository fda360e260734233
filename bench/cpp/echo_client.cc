// echo_client (gRPC C++): the reference side of the client benchmark,
// calling /bench.Echo/Unary with gRPC's callback API (stub->async()).
//
//   echo_client --target HOST:PORT [--concurrency N] [--connections C]
//               [--duration S] [--warmup S] [--size B] [--rate R]
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
#include <grpcpp/grpcpp.h>
#include <signal.h>

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

void Usage(FILE *f, const char *prog) {
  std::fprintf(
      f,
      "usage: %s --target HOST:PORT [--concurrency N] [--connections C]\n"
      "          [--duration S] [--warmup S] [--size B] [--rate R]\n"
      "  --target HOST:PORT  the bench.Echo server\n"
      "  --concurrency N     calls outstanding, closed loop (default 64)\n"
      "  --connections C     channels = TCP connections (default 1)\n"
      "  --duration S        measured seconds (default 5)\n"
      "  --warmup S          seconds before measuring (default 0.5)\n"
      "  --size B            payload bytes (default 64)\n"
      "  --rate R            open loop: R calls/s in total\n",
      prog);
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
  std::string target;
  double concurrency = 64, connections = 1, duration = 5, warmup = 0.5,
         size = 64, rate = 0;
  for (int i = 1; i < argc; i++) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      Usage(stdout, prog);
      return 0;
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
    } else if (flag == "--rate") {
      ok = ParseDouble(val, 0, 1e8, &rate);
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
  signal(SIGPIPE, SIG_IGN);

  unsigned n_conn = static_cast<unsigned>(connections);
  std::vector<std::unique_ptr<bench::Echo::Stub>> stubs;
  for (unsigned i = 0; i < n_conn; i++) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", static_cast<int>(i));
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto ch = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    // Connect before the clock starts (the warm-up is not measured either).
    ch->WaitForConnected(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    stubs.push_back(bench::Echo::NewStub(ch));
  }

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
