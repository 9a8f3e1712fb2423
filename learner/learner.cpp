#include "learner/learner.h"

#include <unistd.h>

#include <cmath>
#include <deque>
#include <filesystem>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "learner/losses.h"
#include "models/policy.h"
#include "runtime/error.h"
#include "runtime/param_channel.h"
#include "runtime/rollout.h"
#include "runtime/run_dir.h"
#include "runtime/run_setup.h"
#include "runtime/transport.h"
#include "runtime/wire.h"

namespace mpirl::learner {
namespace {

// A live bar only for a person at a terminal: Open MPI gives ranks a pty even when mpirun's own
// output goes to a file, so also require a real TERM. MPIRL_STATUS=plain|live overrides.
bool live_status() {
  static const bool live = [] {
    const char* force = std::getenv("MPIRL_STATUS");
    if (force) return std::string(force) == "live";
    const char* term = std::getenv("TERM");
    return isatty(STDOUT_FILENO) && term && *term && std::string(term) != "dumb" && !std::getenv("CI");
  }();
  return live;
}

torch::Device pick_device(const Config& cfg, int rank) {
  bool cuda = torch::cuda::is_available();
  if (cfg.learner.device == "cuda" && !cuda)
    throw Error(fmt::format("learner.device = \"cuda\" but no CUDA device is visible on rank {}", rank));
  if (cfg.learner.device == "cpu" || !cuda) return torch::kCPU;
  const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int local = lr ? std::atoi(lr) : rank;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local % int(torch::cuda::device_count())));
}

struct Window {  // mean of the last N values
  explicit Window(size_t n) : n(n) {}
  void add(double v) {
    q.push_back(v);
    sum += v;
    if (q.size() > n) sum -= q.front(), q.pop_front();
  }
  double mean() const { return q.empty() ? std::nan("") : sum / double(q.size()); }
  size_t n;
  std::deque<double> q;
  double sum = 0;
};

class Learner {
 public:
  Learner(const Config& cfg, const Comms& comms, const std::string& run_dir)
      : cfg_(cfg), comms_(comms), run_dir_(run_dir), lead_(comms.rank == 0), device_(pick_device(cfg, comms.rank)),
        spec_(env_spec(cfg)), layout_(seq_layout(cfg, spec_)), returns_(100), lengths_(100) {
    torch::manual_seed(cfg.run.seed);
    policy_ = models::Policy(spec_, model_options(cfg));
    n_params_ = models::num_params(policy_);
    MPIRL_CHECK(policy_->state_size() == layout_.state_size(), "core state size {} != layout's {}",
                policy_->state_size(), layout_.state_size());
    flat_.resize(size_t(n_params_));
    // All learners start from learner 0's parameters.
    models::write_flat(policy_, flat_.data());
    MPIRL_MPI(MPI_Bcast(flat_.data(), int(n_params_), MPI_FLOAT, 0, comms.learners));
    models::read_flat(policy_, flat_.data());
    policy_->to(device_);
    if (cfg.learner.optimizer == "adam") {
      optim_ = std::make_unique<torch::optim::Adam>(
          policy_->parameters(), torch::optim::AdamOptions(cfg.learner.lr)
                                     .betas({cfg.learner.adam_beta1, cfg.learner.adam_beta2})
                                     .eps(cfg.learner.eps));
    } else {
      optim_ = std::make_unique<torch::optim::RMSprop>(
          policy_->parameters(), torch::optim::RMSpropOptions(cfg.learner.lr)
                                     .alpha(cfg.learner.rmsprop_alpha)
                                     .eps(cfg.learner.eps)
                                     .momentum(cfg.learner.rmsprop_momentum));
    }
    lo_.gamma = cfg.learner.gamma;
    lo_.value_coef = cfg.learner.value_coef;
    lo_.entropy_coef = cfg.learner.entropy_coef;
    lo_.appo_clip = cfg.learner.appo_clip;
    lo_.vtrace.rho_bar = cfg.learner.rho_bar;
    lo_.vtrace.c_bar = cfg.learner.c_bar;
    lo_.vtrace.lambda = cfg.learner.lambda;
    if (lead_) {
      params_ = std::make_unique<ParamChannel>(comms.publish, n_params_);
      metrics_ = std::make_unique<MetricsLog>(run_dir + "/metrics.jsonl");
    }
  }

  void run() {
    start_ = now_seconds();
    if (lead_) {  // actors wait for version 0 before stepping
      publish();
      params_->wait();
    }
    for (int i = 0; i < cfg_.learner.prefetch; ++i) request();
    last_log_ = start_;
    std::string reason;
    for (;;) {
      receive_batch();
      request();
      train_on_batch();
      ++updates_;
      if (lead_ && updates_ % cfg_.learner.publish_interval == 0 && params_->idle()) publish();
      if (lead_) reason = stop_reason();
      if (agree_stop(!reason.empty())) break;
      if (lead_ && now_seconds() - last_log_ >= cfg_.run.log_interval_s) log_status(false);
    }
    shutdown(reason);
  }

 private:
  void request() {
    wire::Envelope env;
    env.kind = wire::Kind::SampleRequest;
    env.sender = comms_.rank;
    env.seq = seq_++;
    env.policy_version = updates_;
    auto& buf = sends_.acquire();
    buf = wire::build_frame(env, nullptr, 0);
    sends_.send(buf, buf.size(), comms_.layout.replay_rank(), kTagLearnerReq, comms_.world);
  }

  void publish() {
    models::write_flat(policy_, flat_.data());
    params_->publish(flat_.data(), updates_);
  }

  void while_waiting() {
    sends_.progress();
    if (lead_) {
      params_->idle();
      if (now_seconds() - last_log_ >= cfg_.run.log_interval_s) log_status(false);
    }
  }

  void receive_batch() {
    Backoff b;
    size_t n = 0;
    double t0 = now_seconds();
    while (try_recv(comms_.world, comms_.layout.replay_rank(), kTagLearnerReply, rbuf_, &n) < 0) {
      while_waiting();
      b.idle();
    }
    wait_s_ += now_seconds() - t0;
    auto msg = wire::decode(rbuf_.data(), n, comms_.layout.replay_rank(), {wire::Kind::SampleReply});
    const int64_t B = layout_.check(msg, comms_.layout.replay_rank());
    MPIRL_CHECK(B == cfg_.learner.batch_size, "replay sent {} sequences, expected {}", B, cfg_.learner.batch_size);
    replay_meta_ = msg.env.meta;
    const size_t nf = layout_.fields().size();
    const float* r = msg.array<float>(nf);
    const int32_t* l = msg.array<int32_t>(nf + 1);
    for (size_t k = 0; k < msg.desc(nf).elements(); ++k) {
      returns_.add(r[k]);
      lengths_.add(l[k]);
      ++episodes_;
    }
    // Policy lag of every sequence in the batch.
    const int64_t* ver = msg.array<int64_t>(size_t(layout_.index("version")));
    for (int64_t i = 0; i < B; ++i) {
      int64_t lag = updates_ - ver[i];
      lag_sum_ += double(lag);
      lag_max_ = std::max(lag_max_, lag);
      ++lag_n_;
    }
    // Env-major [B, T, ...] on the wire -> time-major [T, B, ...] on the device.
    auto field = [&](const char* name, torch::ScalarType st) {
      int i = layout_.index(name);
      const auto& d = msg.desc(size_t(i));
      auto t = torch::from_blob(const_cast<char*>(msg.payload) + msg.offsets[size_t(i)], d.shape, st);
      return t.to(device_).transpose(0, 1);
    };
    auto f = torch::kFloat32;
    batch_.obs = field("obs", f).contiguous();
    batch_.actions = field("action", spec_.discrete ? torch::kInt64 : f).contiguous();
    batch_.rewards = field("reward", f).contiguous();
    batch_.terminated = field("terminated", torch::kUInt8).to(f).contiguous();
    batch_.truncated = field("truncated", torch::kUInt8).to(f).contiguous();
    batch_.behaviour_logp = field("logp", f).contiguous();
    batch_.trunc_value = field("trunc_value", f).contiguous();
    batch_.is_init = field("is_init", torch::kUInt8).to(f).contiguous();
    // Replay bookkeeping: which items these are (for priority updates) and their importance weights.
    int is = msg.find("slot"), ig = msg.find("generation"), iw = msg.find("weight");
    MPIRL_CHECK(is >= 0 && ig >= 0 && iw >= 0, "SampleReply without slot/generation/weight arrays");
    slots_.assign(msg.array<int64_t>(size_t(is)), msg.array<int64_t>(size_t(is)) + B);
    gens_.assign(msg.array<int64_t>(size_t(ig)), msg.array<int64_t>(size_t(ig)) + B);
    if (prioritized_)
      batch_.weights = torch::from_blob(const_cast<float*>(msg.array<float>(size_t(iw))), {B}, f)
                           .to(device_, f, /*non_blocking=*/false, /*copy=*/true);  // rbuf_ is reused
    if (layout_.state_size() > 0) {  // [B, S]: batch-major, no transpose
      int i = layout_.index("state0");
      batch_.state0 = torch::from_blob(const_cast<char*>(msg.payload) + msg.offsets[size_t(i)],
                                       {B, layout_.state_size()}, f)
                          .to(device_, f, /*non_blocking=*/false, /*copy=*/true);
    }
  }

  void step(const LossTerms& l) {
    optim_->zero_grad();
    l.total.backward();
    allreduce_grads();
    if (cfg_.learner.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(policy_->parameters(), cfg_.learner.max_grad_norm);
    optim_->step();
  }

  // Averages gradients over learners (MPI_Allreduce; the NCCL path comes with GPU learners).
  void allreduce_grads() {
    if (comms_.layout.learners == 1) return;
    auto params = policy_->parameters();
    std::vector<torch::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
    auto flat = torch::cat(grads).to(torch::kCPU).contiguous();
    MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, flat.data_ptr<float>(), int(flat.numel()), MPI_FLOAT, MPI_SUM, comms_.learners));
    flat.div_(double(comms_.layout.learners));
    flat = flat.to(device_);
    int64_t off = 0;
    for (auto& p : params) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      p.mutable_grad().copy_(flat.slice(0, off, off + p.numel()).view_as(p));
      off += p.numel();
    }
  }

  void train_on_batch() {
    policy_->train();
    if (cfg_.learner.algo == "impala") {
      auto out = policy_->unroll(batch_.obs, batch_.is_init, batch_.state0);
      auto l = impala_loss(spec_, batch_, out, lo_);
      step(l);
      record(l);
      send_priorities(l.priorities);
      return;
    }
    std::vector<torch::Tensor> prios;
    const int64_t B = cfg_.learner.batch_size, mb = B / cfg_.learner.appo_minibatches;
    for (int ep = 0; ep < cfg_.learner.appo_epochs; ++ep) {
      for (int64_t s = 0; s < B; s += mb) {
        auto sub = batch_.slice_batch(s, s + mb);
        auto out = policy_->unroll(sub.obs, sub.is_init, sub.state0);
        auto l = appo_loss(spec_, sub, out, lo_);
        step(l);
        record(l);
        if (ep == 0) prios.push_back(l.priorities);
      }
    }
    send_priorities(torch::cat(prios));
  }

  // New priorities (mean |vs - V| of each sequence) back to the replay, named by (slot, generation).
  void send_priorities(const torch::Tensor& p) {
    if (!prioritized_) return;
    auto pc = p.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t B = pc.numel();
    MPIRL_CHECK(B == int64_t(slots_.size()), "{} priorities for {} sampled items", B, slots_.size());
    wire::Envelope env;
    env.kind = wire::Kind::PriorityUpdate;
    env.sender = comms_.rank;
    env.seq = seq_++;
    env.arrays = {{"slot", wire::DType::I64, {B}}, {"generation", wire::DType::I64, {B}}, {"priority", wire::DType::F32, {B}}};
    size_t off = wire::natural_payload_offset(env);
    std::vector<size_t> offsets;
    size_t total = off + wire::payload_bytes(env.arrays, &offsets);
    auto& buf = sends_.acquire();
    buf.resize(total);
    wire::write_header(buf.data(), off, env);
    std::memcpy(buf.data() + off + offsets[0], slots_.data(), size_t(B) * 8);
    std::memcpy(buf.data() + off + offsets[1], gens_.data(), size_t(B) * 8);
    std::memcpy(buf.data() + off + offsets[2], pc.data_ptr<float>(), size_t(B) * 4);
    sends_.send(buf, total, comms_.layout.replay_rank(), kTagLearnerReq, comms_.world);
  }

  void record(const LossTerms& l) {
    if (!lead_) return;
    // Host reads happen once per log interval, not per update: keep the tensors.
    last_loss_ = l;
  }

  bool agree_stop(bool stop) {
    if (comms_.layout.learners == 1) return stop;
    int flag = stop ? 1 : 0;
    MPIRL_MPI(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MAX, comms_.learners));
    return flag != 0;
  }

  int64_t env_steps() const {
    auto it = replay_meta_.find("env_steps");
    return it == replay_meta_.end() ? 0 : int64_t(it->second);
  }

  std::string stop_reason() const {
    if (env_steps() >= cfg_.run.total_env_steps) return "total_env_steps";
    if (cfg_.run.max_wall_seconds > 0 && now_seconds() - start_ >= cfg_.run.max_wall_seconds) return "max_wall_seconds";
    if (!std::isnan(cfg_.run.stop_mean_return) && returns_.q.size() >= returns_.n &&
        returns_.mean() >= cfg_.run.stop_mean_return)
      return "stop_mean_return";
    return "";
  }

  nlohmann::json snapshot() {
    double now = now_seconds(), wall = now - start_;
    nlohmann::json j;
    j["time_s"] = wall;
    j["env_steps"] = env_steps();
    j["sps"] = wall > 0 ? double(env_steps()) / wall : 0.0;
    j["learner_updates"] = updates_;
    double samples = double(updates_) * double(cfg_.learner.batch_size) * double(layout_.T());
    j["learner_samples"] = samples;
    j["learner_samples_per_s"] = wall > 0 ? samples / wall : 0.0;
    j["episodes"] = episodes_;
    j["mean_return"] = returns_.q.empty() ? nlohmann::json(nullptr) : nlohmann::json(returns_.mean());
    j["mean_length"] = lengths_.q.empty() ? nlohmann::json(nullptr) : nlohmann::json(lengths_.mean());
    j["policy_lag_mean"] = lag_n_ ? lag_sum_ / double(lag_n_) : 0.0;
    j["policy_lag_max"] = lag_max_;
    j["learner_wait_s"] = wait_s_;
    j["replay_fill"] = replay_meta_.count("fill") ? replay_meta_.at("fill") : 0.0;
    j["replay_capacity"] = cfg_.replay.capacity;
    if (last_loss_.total.defined()) {
      j["loss_total"] = last_loss_.total.item<double>();
      j["loss_policy"] = last_loss_.policy.item<double>();
      j["loss_value"] = last_loss_.value.item<double>();
      j["entropy"] = last_loss_.entropy.item<double>();
      j["mean_rho"] = last_loss_.mean_rho.item<double>();
      j["clip_fraction"] = last_loss_.clip_fraction.item<double>();
    }
    return j;
  }

  void log_status(bool final) {
    auto j = snapshot();
    last_log_ = now_seconds();
    metrics_->write(j);
    auto num = [&](const char* k) { return j[k].is_null() ? std::nan("") : j[k].get<double>(); };
    std::string line = fmt::format(
        "[{:7.1f}s] steps {:>10} | {:>8.0f} SPS | learner {:>8.0f} samples/s | return {:7.1f} | lag {:.1f}/{} | "
        "loss pi {:+.3f} v {:.3f} ent {:.3f} | replay {}/{}",
        num("time_s"), env_steps(), num("sps"), num("learner_samples_per_s"), num("mean_return"),
        num("policy_lag_mean"), lag_max_, j.value("loss_policy", 0.0), j.value("loss_value", 0.0),
        j.value("entropy", 0.0), int64_t(num("replay_fill")), cfg_.replay.capacity);
    if (live_status() && !final) {
      fmt::print("\r{}\x1b[K", line);
    } else {
      fmt::print("{}\n", line);
    }
    std::fflush(stdout);
  }

  void shutdown(const std::string& reason) {
    double wall = now_seconds() - start_;
    if (lead_) params_->publish_stop();
    // Leave the replay: drop replies still in flight, wait for the ByeAck (last message to us).
    wire::Envelope env;
    env.kind = wire::Kind::LearnerBye;
    env.sender = comms_.rank;
    env.seq = seq_++;
    auto& buf = sends_.acquire();
    buf = wire::build_frame(env, nullptr, 0);
    sends_.send(buf, buf.size(), comms_.layout.replay_rank(), kTagLearnerReq, comms_.world);
    std::map<std::string, double> final_replay;
    Backoff b;
    size_t n = 0;
    for (bool acked = false; !acked;) {
      if (try_recv(comms_.world, comms_.layout.replay_rank(), kTagLearnerReply, rbuf_, &n) < 0) {
        sends_.progress();
        b.idle();
        continue;
      }
      auto msg = wire::decode(rbuf_.data(), n, comms_.layout.replay_rank(),
                              {wire::Kind::SampleReply, wire::Kind::LearnerByeAck});
      if (msg.env.kind == wire::Kind::LearnerByeAck) {
        acked = true;
        final_replay = msg.env.meta;
      }
    }
    sends_.wait_all();
    // Parameters of every learner, to check they stayed identical.
    models::write_flat(policy_, flat_.data());
    std::vector<float> all(lead_ ? flat_.size() * size_t(comms_.layout.learners) : 0);
    MPIRL_MPI(MPI_Gather(flat_.data(), int(n_params_), MPI_FLOAT, all.data(), int(n_params_), MPI_FLOAT, 0, comms_.learners));
    if (!lead_) return;
    double max_diff = 0;
    for (int l = 1; l < comms_.layout.learners; ++l)
      for (size_t i = 0; i < flat_.size(); ++i)
        max_diff = std::max(max_diff, double(std::abs(all[size_t(l) * flat_.size() + i] - flat_[i])));
    if (!final_replay.empty()) replay_meta_ = final_replay;
    log_status(true);
    auto s = snapshot();
    s["wall_time_s"] = wall;
    s["sps"] = wall > 0 ? double(env_steps()) / wall : 0.0;
    s["stop_reason"] = reason;
    s["final_mean_return"] = s["mean_return"];
    s["learners"] = comms_.layout.learners;
    s["actors"] = comms_.layout.actors();
    s["world_size"] = comms_.layout.world;
    s["learner_device"] = device_.str();
    s["learner_param_max_abs_diff"] = max_diff;
    s["num_params"] = n_params_;
    s["replay"] = final_replay;
    if (final_replay.count("dump_items")) {
      std::string path = cfg_.replay.dump_path.empty() ? run_dir_ + "/replay.h5" : cfg_.replay.dump_path;
      s["replay_dump"] = {{"path", path},
                          {"items", int64_t(final_replay.at("dump_items"))},
                          {"checksum_crc32", uint32_t(final_replay.at("dump_checksum_crc32"))}};
      spdlog::info("replay dump: {} items, CRC-32 {:08x} -> {}", int64_t(final_replay.at("dump_items")),
                   uint32_t(final_replay.at("dump_checksum_crc32")), path);
    }
    auto cpu = models::Policy(spec_, model_options(cfg_));
    models::read_flat(cpu, flat_.data());
    torch::save(cpu, run_dir_ + "/model.pt");
    write_json_atomic(run_dir_ + "/summary.json", s);
    spdlog::info("run finished ({}): {} env steps in {:.1f} s = {:.0f} SPS, {} updates, mean return {} -> {}",
                 reason, env_steps(), wall, s["sps"].get<double>(), updates_, s["mean_return"].dump(), run_dir_);
  }

  const Config& cfg_;
  const Comms& comms_;
  std::string run_dir_;
  bool lead_;
  torch::Device device_;
  envs::EnvSpec spec_;
  SeqLayout layout_;
  models::Policy policy_{nullptr};
  int64_t n_params_ = 0;
  std::vector<float> flat_;
  std::unique_ptr<torch::optim::Optimizer> optim_;
  LossOptions lo_;
  std::unique_ptr<ParamChannel> params_;
  std::unique_ptr<MetricsLog> metrics_;
  SendPool sends_;
  std::vector<char> rbuf_;
  TrainBatch batch_;
  LossTerms last_loss_;
  std::map<std::string, double> replay_meta_;
  const bool prioritized_ = cfg_.replay.selector == "prioritized";
  std::vector<int64_t> slots_, gens_;
  Window returns_, lengths_;
  int64_t updates_ = 0, episodes_ = 0, lag_max_ = 0, lag_n_ = 0;
  double lag_sum_ = 0, start_ = 0, last_log_ = 0, wait_s_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace

void run_learner(const Config& cfg, const Comms& comms, const std::string& run_dir) {
  torch::set_num_threads(cfg.learner.threads);
  Learner l(cfg, comms, run_dir);
  l.run();
}

}  // namespace mpirl::learner
