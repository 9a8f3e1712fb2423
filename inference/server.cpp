#include "inference/server.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "comm/inference_wire.h"
#include "comm/param_channel.h"
#include "comm/transport.h"
#include "comm/wire.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/fault.h"
#include "envs/registry.h"
#include "inference/batcher.h"
#include "inference/engine.h"

namespace mpirl::inference {
namespace {

EngineOptions engine_options(const Config& cfg, const Comms& comms) {
  EngineOptions o;
  o.emulate_batch_us = cfg.inference.emulate_batch_us;
  o.emulate_row_us = cfg.inference.emulate_row_us;
  o.device = o.emulated() ? torch::Device(torch::kCPU) : pick_inference_device(cfg.inference.device, comms.node_inference_index);
  return o;
}

class Server {
 public:
  Server(const Config& cfg, const Comms& comms)
      : cfg_(cfg), comms_(comms), spec_(envs::env_spec(cfg)), served_(comms.layout.served_by(comms.rank)),
        E_(cfg.env.num_envs), G_(cfg.actor.env_groups),
        engine_(spec_, models::model_options(cfg), std::max<int64_t>(1, int64_t(served_.size()) * E_),
                engine_options(cfg, comms)),
        batcher_(engine_, int(served_.size()), E_, G_, cfg.inference.max_batch_rows, cfg.inference.max_wait_us * 1e-6),
        params_(comms.publish, models::num_params(engine_.policy()), cfg.actor.param_tests) {
    flat_.resize(size_t(models::num_params(engine_.policy())));
    for (int g = 0; g < G_; ++g) max_group_ = std::max(max_group_, env_group(E_, G_, g).n);
    bye_.assign(served_.size(), 0);
    if (served_.empty())
      spdlog::warn("inference rank {} @ {} serves no actor (every actor has an inference rank of its own host)",
                   comms.rank, comms.host(comms.rank));
    spdlog::info("inference rank {} @ {}: {} actor(s) x {} envs in {} group(s), {}; batches of at most {} rows, "
                 "waiting at most {} us",
                 comms.rank, comms.host(comms.rank), served_.size(), E_, G_, engine_.describe(),
                 cfg.inference.max_batch_rows > 0 ? std::min<int64_t>(cfg.inference.max_batch_rows, engine_.max_rows())
                                                  : engine_.max_rows(),
                 cfg.inference.max_wait_us);
    if (engine_options(cfg, comms).emulated())
      spdlog::warn("inference.emulate_batch_us = {} / emulate_row_us = {}: the policy is NOT run; every action is "
                   "drawn from a uniform policy after a sleep of that cost (benchmarks of the pipeline only)",
                   cfg.inference.emulate_batch_us, cfg.inference.emulate_row_us);
  }

  void run() {
    params_.post();
    start_ = last_report_ = now_seconds();
    Backoff idle(100), receiving(10);
    while (!(stopping_ && byes_ == served_.size() && incoming_.empty())) {
      fault_point();
      bool progress = poll_params();
      progress |= receive();
      if (stopping_) {
        for (const auto& r : batcher_.drain()) answer_stop(r);
      } else if (version_ >= 0 && batcher_.due(now_seconds())) {
        serve();
        progress = true;
      }
      if (now_seconds() - last_report_ >= cfg_.run.log_interval_s) report(false);
      sends_.progress();
      if (progress) {
        idle.reset();
      } else if (!incoming_.empty()) {
        receiving.idle();  // a request is arriving: it moves only while this rank calls MPI
      } else {
        idle.idle();
      }
    }
    report(true);
    sends_.wait_all();
    spdlog::info("inference rank {}: {} batches, {} rows ({:.1f} per batch), {} parameter updates", comms_.rank,
                 batcher_.total().batches, batcher_.total().rows,
                 batcher_.total().batches ? double(batcher_.total().rows) / double(batcher_.total().batches) : 0.0,
                 updates_);
  }

 private:
  bool poll_params() {
    int64_t v = 0;
    switch (params_.poll(flat_.data(), &v)) {
      case ParamChannel::Got::Params:
        engine_.load(flat_.data());
        version_ = v;
        ++updates_;
        return true;
      case ParamChannel::Got::Stop:
        stopping_ = true;
        return true;
      case ParamChannel::Got::Nothing: break;
    }
    return false;
  }

  int served_index(int rank) const {
    auto it = std::find(served_.begin(), served_.end(), rank);
    return it == served_.end() ? -1 : int(it - served_.begin());
  }

  MsgBuffer& free_buffer(int* index) {
    for (size_t i = 0; i < rbufs_.size(); ++i)
      if (!rbuf_busy_[i]) {
        rbuf_busy_[i] = 1;
        *index = int(i);
        return rbufs_[i];
      }
    rbufs_.emplace_back();
    rbuf_busy_.push_back(1);
    *index = int(rbufs_.size() - 1);
    return rbufs_.back();
  }

  // Requests are matched as soon as they are announced (MPI_Improbe) and received without blocking
  // (MPI_Imrecv): a large request whose sender is busy stepping envs (a transport without
  // single-copy moves it in fragments, one batch per MPI call of the sender) never holds up the
  // requests of the other actors.
  bool receive() {
    bool any = false;
    for (;;) {
      int flag = 0;
      MPI_Message m;
      MPI_Status st;
      MPIRL_MPI(MPI_Improbe(MPI_ANY_SOURCE, kTagInferReq, comms_.world, &flag, &m, &st));
      if (!flag) break;
      any = true;
      int count = 0;
      MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
      int b = -1;
      MsgBuffer& buf = free_buffer(&b);
      if (buf.buf.size() < size_t(count)) buf.buf.resize(size_t(count));
      MPIRL_MPI(MPI_Imrecv(buf.buf.data(), count, MPI_BYTE, &m, &buf.req));
      incoming_.push_back({b, st.MPI_SOURCE, count});
    }
    for (size_t i = 0; i < incoming_.size();) {
      const Incoming in = incoming_[i];
      int done = 0;
      MPIRL_MPI(MPI_Test(&rbufs_[size_t(in.buffer)].req, &done, MPI_STATUS_IGNORE));
      if (!done) {
        ++i;
        continue;
      }
      incoming_.erase(incoming_.begin() + std::ptrdiff_t(i));
      handle(in);
      any = true;
    }
    return any;
  }

  struct Incoming {
    int buffer, src, count;
  };

  void handle(const Incoming& in) {
    const int src = in.src, b = in.buffer;
    const std::vector<char>& buf = rbufs_[size_t(b)].buf;
    const int a = served_index(src);
    if (a < 0)
      throw Error(fmt::format("inference rank {}: a request from rank {} ({} @ {}), which this rank does not serve",
                              comms_.rank, src, role_name(comms_.layout.role_of(src)), comms_.host(src)));
    const auto msg = wire::decode(buf.data(), size_t(in.count), src, {wire::Kind::InferRequest, wire::Kind::InferBye});
    if (msg.env.kind == wire::Kind::InferBye) {
      rbuf_busy_[size_t(b)] = 0;
      if (bye_[size_t(a)]) throw Error(fmt::format("inference rank {}: a second InferBye from actor rank {}", comms_.rank, src));
      bye_[size_t(a)] = 1;
      ++byes_;
      return;
    }
    const auto v = read_infer_request(msg, spec_, G_, max_group_, src);
    const EnvGroup want = env_group(E_, G_, v.group);
    if (v.first_env != want.first || v.n != want.n)
      throw Error(fmt::format("InferRequest from rank {}: group {} holds envs [{}, {}), the request [{}, {})", src,
                              v.group, want.first, want.first + want.n, v.first_env, v.first_env + v.n));
    if (bye_[size_t(a)]) throw Error(fmt::format("inference rank {}: a request from actor rank {} after its InferBye", comms_.rank, src));
    Request r;
    r.actor = a;
    r.group = v.group;
    r.first = v.first_env;
    r.n = v.n;
    r.seq = msg.env.seq;
    r.arrived = now_seconds();
    r.obs = v.obs;
    r.is_init = v.is_init;
    r.buffer = b;
    if (stopping_) return answer_stop(r);
    batcher_.add(r);
  }

  void answer_stop(const Request& r) {
    rbuf_busy_[size_t(r.buffer)] = 0;
    wire::Envelope env;
    env.kind = wire::Kind::Stop;
    env.sender = comms_.rank;
    env.seq = r.seq;
    auto& out = sends_.acquire();
    out = wire::build_frame(env, nullptr, 0);
    sends_.send(out, out.size(), served_[size_t(r.actor)], kTagInferReply + r.group, comms_.world);
  }

  void serve() {
    const auto& served = batcher_.run_batch(now_seconds());
    const int64_t L = spec_.dist_size(), S = batcher_.state_size();
    for (const auto& s : served) {
      const Request& r = s.req;
      rbuf_busy_[size_t(r.buffer)] = 0;
      wire::Envelope env;
      env.kind = wire::Kind::InferReply;
      env.sender = comms_.rank;
      env.seq = r.seq;
      env.policy_version = version_;
      env.arrays = infer_reply_arrays(spec_, r.n, S);
      std::vector<size_t> off;
      const size_t payload = wire::payload_bytes(env.arrays, &off);
      auto& out = sends_.acquire();
      out.resize(wire::kHeaderRegion + payload);
      wire::write_header(out.data(), wire::kHeaderRegion, env);
      char* p = out.data() + wire::kHeaderRegion;
      std::memcpy(p + off[0], engine_.dist() + s.row * L, size_t(r.n * L) * sizeof(float));
      if (S > 0) std::memcpy(p + off[1], batcher_.state_of(r.actor, r.first), size_t(r.n * S) * sizeof(float));
      const int32_t g[2] = {r.group, r.first};
      std::memcpy(p + off.back(), g, sizeof(g));
      sends_.send(out, out.size(), served_[size_t(r.actor)], kTagInferReply + r.group, comms_.world);
    }
    batcher_.replied(now_seconds());
  }

  // Statistics to learner 0: cumulative ("total") and since the last report ("window").
  void report(bool final) {
    const double now = now_seconds();
    nlohmann::json j = {{"rank", comms_.rank},
                        {"host", comms_.host(comms_.rank)},
                        {"device", engine_.describe()},
                        {"actors", served_.size()},
                        {"groups", G_},
                        {"version", version_},
                        {"param_updates", updates_},
                        {"final", final},
                        {"elapsed_s", now - start_},
                        {"window_s", now - last_report_},
                        {"total", batcher_.total().to_json()},
                        {"window", batcher_.take_window().to_json()}};
    last_report_ = now;
    const std::string text = j.dump();
    wire::Envelope env;
    env.kind = wire::Kind::InferStats;
    env.sender = comms_.rank;
    env.seq = report_seq_++;
    env.arrays = {{"json", wire::DType::U8, {int64_t(text.size())}}};
    auto& out = sends_.acquire();
    out = wire::build_frame(env, text.data(), text.size());
    sends_.send(out, out.size(), 0, kTagInferStats, comms_.world);
  }

  const Config& cfg_;
  const Comms& comms_;
  envs::EnvSpec spec_;
  std::vector<int> served_;  // actor ranks, in rank order
  int E_, G_, max_group_ = 1;
  Engine engine_;
  Batcher batcher_;
  ParamChannel params_;
  std::vector<float> flat_;
  std::deque<MsgBuffer> rbufs_;  // receive buffers; a queued request keeps its own (left to MPI if
                                 // the rank unwinds with a receive posted into one)
  std::vector<Incoming> incoming_;  // matched requests still arriving
  std::vector<char> rbuf_busy_;
  SendPool sends_;
  std::vector<char> bye_;
  size_t byes_ = 0;
  int64_t version_ = -1, updates_ = 0;
  bool stopping_ = false;
  double start_ = 0, last_report_ = 0;
  uint64_t report_seq_ = 0;
};

}  // namespace

void run_inference(const Config& cfg, const Comms& comms) {
  torch::set_num_threads(cfg.inference.threads);
  // Its waits are short sleeps (inference/batcher.h's latency is the actors' time): without this,
  // Linux's default 50 us timer slack makes a 10 us sleep last 60 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Server s(cfg, comms);
  s.run();
}

}  // namespace mpirl::inference
