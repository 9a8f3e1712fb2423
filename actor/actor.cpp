#include "actor/actor.h"

#include <sys/prctl.h>

#include <cstdlib>
#include <limits>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "actor/actor_loop.h"
#include "actor/group_policy.h"
#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/policy.h"
#include "core/error.h"
#include "core/test_hooks.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "comm/wire.h"

namespace mpirl::actor {
namespace {

Groups make_groups(int num_envs, int groups) {
  Groups g;
  for (int i = 0; i < groups; ++i) g.g.push_back(env_group(num_envs, groups, i));
  return g;
}

}  // namespace

// A resumed run (segment > 0) mixes its segment into the seeds: envs start new episodes with
// new randomness rather than repeating the first segment's (env states are not checkpointed).
// Env group 0 is seeded as the whole actor was before groups existed; group g > 0 by a stream of it.
Actor::Actor(const Config& cfg, const Comms& comms, int64_t segment)
    : cfg_(cfg), comms_(comms), E_(cfg.env.num_envs), T_(cfg.actor.rollout_len),
      O_(rollout_overlap(cfg)),
      seed_(envs::mix_seed(cfg.run.seed, 0x5e9u + uint64_t(segment))), groups_(make_groups(E_, cfg.actor.env_groups)) {
  const uint64_t env_seed =
      envs::mix_seed(segment ? seed_ : cfg.run.seed, 1000003ull + uint64_t(comms.layout.actor_index(comms.rank)));
  for (size_t g = 0; g < groups_.g.size(); ++g)
    venv_.push_back(envs::make_vector_env(cfg, groups_.g[g].n, g == 0 ? env_seed : envs::mix_seed(env_seed, 0xb7e1u + g)));
  spec_ = venv_[0]->spec();
  layout_ = std::make_unique<SeqLayout>(spec_, T_, models::state_size(cfg, spec_), seq_layout_priority(cfg));
  const uint64_t act_seed = envs::mix_seed(segment ? seed_ : cfg.run.seed, 77 + uint64_t(comms.rank));
  if (comms.layout.central())
    policy_ = std::make_unique<RemotePolicy>(cfg, comms, spec_, groups_, act_seed);
  else
    policy_ = std::make_unique<LocalPolicy>(cfg, comms, spec_, groups_, act_seed);
  priority_ = priority_options(cfg);
  credits_ = cfg.actor.max_inflight;
  if (cfg.actor.reward_norm) reward_norm_ = std::make_unique<RewardNormalizer>(E_, cfg.learner.gamma);
  if (cfg.actor.synchronous)  // (make_layout refused a share that is not whole rollouts)
    turn_quota_ = int64_t(cfg.learner.batch_size) * comms.layout.learners / (int64_t(comms.layout.actors()) * E_);
  size_t payload = wire::payload_bytes(layout_->arrays(E_, true, E_ * T_));
  slots_.resize(size_t(cfg.actor.max_inflight));
  for (auto& s : slots_) s.buf.resize(wire::kHeaderRegion + payload);
  boot_count_.assign(size_t(E_), 0);
  overlap_state_.assign(O_ > 0 ? size_t(E_ * layout_->state_size()) : 0, 0.0f);
  step_version_.assign(size_t(T_), 0);
  ctl_.buf.resize(4096);
  // (actor.compress_obs = "zstd" on other observations is refused at start by rank 0.)
  if (cfg.actor.compress_obs != "none" && obs_compressible(spec_))
    codec_ = std::make_unique<ObsCodec>(ObsCodecOptions{cfg.actor.compress_level, true, false});
}

void Actor::run() {
  c10::InferenceMode inference;  // no autograd bookkeeping (version counters, views) per step
  post_ctl();
  if (!policy_->start()) return finish();
  Slot* s = &slots_[0];
  for (size_t g = 0; g < groups_.g.size(); ++g) {
    const int first = groups_.g[g].first;
    venv_[g]->reset(obs_row(*s, first, 0), (T_ + 1) * spec_.obs_size(), u8(*s, Seq::IsInit) + first * (T_ + 1), T_ + 1);
    policy_->observed(int(g), obs_row(*s, first, 0), (T_ + 1) * spec_.obs_size(), u8(*s, Seq::IsInit) + first * (T_ + 1),
                      T_ + 1);
  }
  size_t k = 0;
  int64_t t0 = 0;  // the first rollout repeats nothing
  while (!stop_) {
    if (!take_turn()) break;
    if (!collect(*s, t0)) break;
    send(*s);
    Slot* next = &slots_[++k % slots_.size()];
    if (!wait_for(*next)) break;
    carry_over(*s, *next);
    t0 = O_;
    s = next;
  }
  finish();
}

// Consumes control messages from the replay; returns true once ActorDoneAck has arrived.
bool Actor::poll_ctl() {
  while (!done_acked_) {
    int done = 0;
    MPI_Status st;
    MPIRL_MPI(MPI_Test(&ctl_.req, &done, &st));
    if (!done) return false;
    int count = 0;
    MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    auto msg = wire::decode(ctl_.buf.data(), size_t(count), st.MPI_SOURCE,
                            {wire::Kind::RolloutAck, wire::Kind::ActorDoneAck});
    if (msg.env.kind == wire::Kind::ActorDoneAck) {
      done_acked_ = true;
    } else {
      ++credits_;
      post_ctl();
    }
  }
  return true;
}

// Serves the replay's control messages and the parameters, backing off, until `done()` holds;
// false when stopping.
template <class Done>
bool Actor::wait_until(Done done) {
  for (Backoff b;; b.idle()) {
    poll_ctl();
    if (!policy_->poll()) stop_ = true;
    if (stop_) return false;
    if (done()) return true;
  }
}

// Waits until slot `s` is free to fill and a send credit is available; false when stopping.
bool Actor::wait_for(Slot& s) {
  return wait_until([&] {
    int done = 1, zdone = 1;
    if (s.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE));
    if (s.z.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&s.z.req, &zdone, MPI_STATUS_IGNORE));
    return done && zdone && credits_ > 0;
  });
}

// actor.synchronous: an actor starts at most turn_quota_ rollouts with one version of the
// parameters (its share of the learners' next batch), then waits for a newer version, which the
// learners publish once that batch is learned: every sequence is collected by the parameters that
// learn from it. False when stopping.
bool Actor::take_turn() {
  if (turn_quota_ == 0) return true;
  if (policy_->version() == turn_version_ && turn_count_ >= turn_quota_ &&
      !wait_until([&] { return policy_->version() != turn_version_; }))
    return false;
  if (policy_->version() != turn_version_) {
    turn_version_ = policy_->version();
    turn_count_ = 0;
  }
  ++turn_count_;
  return true;
}

void Actor::send(Slot& s) {
  std::vector<envs::EpisodeStat> stats;
  for (auto& v : venv_) {
    auto f = v->take_finished();
    stats.insert(stats.end(), f.begin(), f.end());
  }
  const int64_t m = int64_t(stats.size());
  MPIRL_CHECK(m <= E_ * T_, "{} episodes in one rollout", m);
  auto arrays = layout_->arrays(E_, true, m);
  std::vector<size_t> offsets;
  wire::payload_bytes(arrays, &offsets);
  const size_t nf = layout_->fields().size();
  auto* ver = field<int64_t>(s, Seq::Version);
  auto* act = field<int32_t>(s, Seq::Actor);
  auto* idx = field<int32_t>(s, Seq::EnvIndex);
  for (int64_t e = 0; e < E_; ++e) {
    ver[e] = min_version_;
    act[e] = comms_.rank;
    idx[e] = int32_t(e);
  }
  if (layout_->has(Seq::InitialPriority)) {  // R2D2 with r2d2.initial_priority = "actor": the rows are Q-values
    const int64_t A = spec_.dist_size();
    auto* pr = field<float>(s, Seq::InitialPriority);
    for (int64_t e = 0; e < E_; ++e)
      pr[e] = sequence_priority(f32(s, Seq::Dist) + e * T_ * A, A, A, field<int64_t>(s, Seq::Action) + e * T_,
                                f32(s, Seq::Reward) + e * T_, u8(s, Seq::Terminated) + e * T_,
                                u8(s, Seq::Truncated) + e * T_, T_, priority_);
    // MPIRL_TEST_PRIORITY_NAN=K: from this actor's K-th rollout on, the last env's priority is NaN
    // (the replay's refusal of a corrupt item; tests/mpi/r2d2_test.py, r2d2_priority_nan).
    if (const char* h = test_hook("MPIRL_TEST_PRIORITY_NAN"); h && int64_t(seq_) + 1 >= std::atoll(h))
      pr[E_ - 1] = std::numeric_limits<float>::quiet_NaN();
  }
  auto* r = reinterpret_cast<float*>(s.payload() + offsets[nf]);
  auto* l = reinterpret_cast<int32_t*>(s.payload() + offsets[nf + 1]);
  for (int64_t k = 0; k < m; ++k) {
    r[k] = stats[size_t(k)].ret;
    l[k] = stats[size_t(k)].length;
  }
  wire::Envelope env;
  env.kind = wire::Kind::Rollout;
  env.sender = comms_.rank;
  env.seq = seq_++;
  env.policy_version = min_version_;
  if (codec_) {
    const size_t total = encode_rollout(*codec_, *layout_, s.payload(), E_, m, env, s.z.buf);
    MPIRL_MPI(MPI_Isend(s.z.buf.data(), int(total), MPI_BYTE, comms_.layout.replay_of(comms_.rank), kTagRollout, comms_.world,
                        &s.z.req));
  } else {
    env.arrays = std::move(arrays);
    size_t total = wire::write_header(s.buf.data(), wire::kHeaderRegion, env);
    MPIRL_MPI(MPI_Isend(s.buf.data(), int(total), MPI_BYTE, comms_.layout.replay_of(comms_.rank), kTagRollout, comms_.world,
                        &s.req));
  }
  env_steps_sent_ += E_ * new_steps(T_, O_, seq_ - 1);  // (seq_ counted this rollout)
  --credits_;
}

// Stop: every inference request is settled, every rollout already sent is delivered, then
// ActorDone, then wait for its ack.
void Actor::finish() {
  policy_->finish();
  for (auto& s : slots_) {
    wait_request(s.req, [&] { poll_ctl(); });
    wait_request(s.z.req, [&] { poll_ctl(); });
  }
  wire::Envelope env;
  env.kind = wire::Kind::ActorDone;
  env.sender = comms_.rank;
  env.seq = seq_++;
  env.arrays = {{"env_steps", wire::DType::I64, {1}}};
  MsgBuffer done;  // poll_ctl() may throw while the send is pending
  done.buf = wire::build_frame(env, &env_steps_sent_, sizeof(env_steps_sent_));
  MPIRL_MPI(MPI_Isend(done.buf.data(), int(done.buf.size()), MPI_BYTE, comms_.layout.replay_of(comms_.rank), kTagRollout,
                      comms_.world, &done.req));
  wait_request(done.req, [&] { poll_ctl(); });
  for (Backoff b; !poll_ctl();) b.idle();
  spdlog::debug("actor {}: done after {} rollouts", comms_.rank, seq_ - 1);
}

void run_actor(const Config& cfg, const Comms& comms, int64_t segment) {
  torch::set_num_threads(cfg.actor.threads);
  // Central inference: every step waits for a reply, with sleeps of 10-100 us; Linux's default
  // 50 us timer slack would add 50 us to each.
  if (comms.layout.central()) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Actor a(cfg, comms, segment);
  a.run();
}

}  // namespace mpirl::actor
