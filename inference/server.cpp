// The inference rank's loop (inference/server_internal.h): its start, the parameters from learner
// 0, the statistics it reports, and run_inference.
#include "inference/server.h"

#include <sys/prctl.h>

#include <algorithm>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "comm/inference_wire.h"
#include "comm/wire.h"
#include "core/clock.h"
#include "core/fault.h"
#include "envs/registry.h"
#include "inference/engine.h"
#include "inference/server_internal.h"

namespace mpirl::inference {
namespace {

EngineOptions engine_options(const Config& cfg, const Comms& comms) {
  EngineOptions o;
  o.emulate_batch_us = cfg.inference.emulate_batch_us;
  o.emulate_row_us = cfg.inference.emulate_row_us;
  o.device = o.emulated() ? torch::Device(torch::kCPU) : pick_inference_device(cfg.inference.device, comms.node_inference_index);
  return o;
}

}  // namespace

Server::Server(const Config& cfg, const Comms& comms)
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

void Server::run() {
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

bool Server::poll_params() {
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

// Statistics to learner 0: cumulative ("total") and since the last report ("window").
void Server::report(bool final) {
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

void run_inference(const Config& cfg, const Comms& comms) {
  torch::set_num_threads(cfg.inference.threads);
  // Its waits are short sleeps (inference/batcher.h's latency is the actors' time): without this,
  // Linux's default 50 us timer slack makes a 10 us sleep last 60 us.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Server s(cfg, comms);
  s.run();
}

}  // namespace mpirl::inference
