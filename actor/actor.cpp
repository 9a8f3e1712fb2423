#include "actor/actor.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "actor/group_policy.h"
#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/policy.h"
#include "core/error.h"
#include "core/fault.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "comm/wire.h"

namespace mpirl::actor {
namespace {

// One preallocated rollout message: header region, then the payload for E sequences and room for
// up to E*T finished-episode statistics.
// (A MsgBuffer: kept for MPI if the actor dies with its send in flight.)
// With compressed observations the frame sent is z's (buf keeps the raw rollout, whose last
// observations start the next one).
struct Slot : MsgBuffer {
  MsgBuffer z;
  char* payload() { return buf.data() + wire::kHeaderRegion; }
};

Groups make_groups(int num_envs, int groups) {
  Groups g;
  for (int i = 0; i < groups; ++i) g.g.push_back(env_group(num_envs, groups, i));
  return g;
}

class Actor {
 public:
  // A resumed run (segment > 0) mixes its segment into the seeds: envs start new episodes with
  // new randomness rather than repeating the first segment's (env states are not checkpointed).
  // Env group 0 is seeded as the whole actor was before groups existed; group g > 0 by a stream of it.
  Actor(const Config& cfg, const Comms& comms, int64_t segment)
      : cfg_(cfg), comms_(comms), E_(cfg.env.num_envs), T_(cfg.actor.rollout_len),
        seed_(envs::mix_seed(cfg.run.seed, 0x5e9u + uint64_t(segment))), groups_(make_groups(E_, cfg.actor.env_groups)) {
    const uint64_t env_seed =
        envs::mix_seed(segment ? seed_ : cfg.run.seed, 1000003ull + uint64_t(comms.layout.actor_index(comms.rank)));
    for (size_t g = 0; g < groups_.g.size(); ++g)
      venv_.push_back(envs::make_vector_env(cfg, groups_.g[g].n, g == 0 ? env_seed : envs::mix_seed(env_seed, 0xb7e1u + g)));
    spec_ = venv_[0]->spec();
    layout_ = std::make_unique<SeqLayout>(spec_, T_, models::state_size(cfg, spec_));
    const uint64_t act_seed = envs::mix_seed(segment ? seed_ : cfg.run.seed, 77 + uint64_t(comms.rank));
    if (comms.layout.central())
      policy_ = std::make_unique<RemotePolicy>(cfg, comms, spec_, groups_, act_seed);
    else
      policy_ = std::make_unique<LocalPolicy>(cfg, comms, spec_, groups_, act_seed);
    credits_ = cfg.actor.max_inflight;
    size_t payload = wire::payload_bytes(layout_->arrays(E_, true, E_ * T_));
    slots_.resize(size_t(cfg.actor.max_inflight));
    for (auto& s : slots_) s.buf.resize(wire::kHeaderRegion + payload);
    boot_count_.assign(size_t(E_), 0);
    ctl_.buf.resize(4096);
    // (actor.compress_obs = "zstd" on other observations is refused at start by rank 0.)
    if (cfg.actor.compress_obs != "none" && obs_compressible(spec_))
      codec_ = std::make_unique<ObsCodec>(ObsCodecOptions{cfg.actor.compress_level, true, false});
  }

  void run() {
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
    while (!stop_) {
      if (!collect(*s)) break;
      send(*s);
      Slot* next = &slots_[++k % slots_.size()];
      if (!wait_for(*next)) break;
      carry_over(*s, *next);
      s = next;
    }
    finish();
  }

 private:
  template <class T>
  T* field(Slot& s, Seq f) { return layout_->ptr<T>(s.payload(), f, E_); }
  float* f32(Slot& s, Seq f) { return field<float>(s, f); }
  uint8_t* u8(Slot& s, Seq f) { return field<uint8_t>(s, f); }
  // Observation t of env e in a slot (float32 or uint8 as the spec says).
  uint8_t* obs_row(Slot& s, int64_t e, int64_t t) {
    return u8(s, Seq::Obs) + (e * (T_ + 1) + t) * spec_.obs_bytes();
  }

  void post_ctl() { MPIRL_MPI(MPI_Irecv(ctl_.buf.data(), int(ctl_.buf.size()), MPI_BYTE, comms_.layout.replay_of(comms_.rank),
                                        kTagActorCtl, comms_.world, &ctl_.req)); }

  // Consumes control messages from the replay; returns true once ActorDoneAck has arrived.
  bool poll_ctl() {
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

  // Waits until slot `s` is free to fill and a send credit is available; false when stopping.
  bool wait_for(Slot& s) {
    Backoff b;
    for (;;) {
      poll_ctl();
      if (!policy_->poll()) stop_ = true;
      if (stop_) return false;
      int done = 1, zdone = 1;
      if (s.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE));
      if (s.z.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&s.z.req, &zdone, MPI_STATUS_IGNORE));
      if (done && zdone && credits_ > 0) return true;
      b.idle();
    }
  }

  // Steps T times, group after group, writing straight into the slot. False if a Stop arrived
  // mid-rollout.
  bool collect(Slot& s) {
    const int64_t D = spec_.obs_size(), L = spec_.dist_size(), A = spec_.action_size(), S = layout_->state_size();
    float* dist = f32(s, Seq::Dist);
    float* logp = f32(s, Seq::Logp);
    char* act = field<char>(s, Seq::Action);
    const int64_t act_bytes = spec_.discrete ? int64_t(sizeof(int64_t)) : A * int64_t(sizeof(float));
    min_version_ = std::numeric_limits<int64_t>::max();
    // The core state carried across rollouts; the learner starts sequence mode from this copy.
    if (S > 0)
      for (int64_t e = 0; e < E_; ++e)
        std::memcpy(f32(s, Seq::State0) + e * S, policy_->state(int(e)), size_t(S) * sizeof(float));
    const int64_t K = layout_->boot_slots();
    if (K > 0) std::fill_n(field<int32_t>(s, Seq::BootStep), E_ * K, -1);
    std::fill(boot_count_.begin(), boot_count_.end(), 0);
    uint8_t* init = u8(s, Seq::IsInit);
    for (int64_t t = 0; t < T_; ++t) {
      for (size_t g = 0; g < groups_.g.size(); ++g) {
        const int64_t first = groups_.g[g].first, n = groups_.g[g].n;
        fault_point();
        // [n, obs...] straight from the slot (the policy converts uint8 pixels itself); the
        // distribution rows and log-probabilities land in the slot.
        if (!policy_->act(int(g), obs_row(s, first, t), (T_ + 1) * D, init + first * (T_ + 1) + t, T_ + 1,
                          {dist + (first * T_ + t) * L, T_ * L, logp + first * T_ + t, T_})) {
          stop_ = true;
          return false;
        }
        min_version_ = std::min(min_version_, policy_->version());
        const char* a = static_cast<const char*>(policy_->actions(int(g)));
        for (int64_t e = 0; e < n; ++e)
          std::memcpy(act + ((first + e) * T_ + t) * act_bytes, a + e * act_bytes, size_t(act_bytes));
        envs::StepOutputs o;
        o.obs = obs_row(s, first, t + 1);
        o.obs_stride = (T_ + 1) * D;
        o.is_init = init + first * (T_ + 1) + t + 1;
        o.is_init_stride = T_ + 1;
        o.reward = f32(s, Seq::Reward) + first * T_ + t;
        o.terminated = u8(s, Seq::Terminated) + first * T_ + t;
        o.truncated = u8(s, Seq::Truncated) + first * T_ + t;
        o.scalar_stride = T_;
        venv_[g]->step(spec_.discrete ? static_cast<const int64_t*>(policy_->actions(int(g))) : nullptr,
                       spec_.discrete ? nullptr : static_cast<const float*>(policy_->actions(int(g))), o);
        for (int64_t e = 0; e < n; ++e)
          if (o.truncated[e * T_] && !o.terminated[e * T_]) record_truncation(s, int(g), first + e, t);
        // Central inference: this group's next observations go out now, while the others step.
        policy_->observed(int(g), obs_row(s, first, t + 1), (T_ + 1) * D, init + first * (T_ + 1) + t + 1, T_ + 1);
      }
    }
    return true;
  }

  // A truncated episode bootstraps from the value of its last state, which the learner computes
  // with its current parameters: the actor sends that observation and its core state there.
  void record_truncation(Slot& s, int g, int64_t e, int64_t t) {
    const int64_t K = layout_->boot_slots(), S = layout_->state_size(), OB = spec_.obs_bytes();
    const int64_t k = boot_count_[size_t(e)]++;
    if (k >= K) {
      if (spec_.max_episode_steps < 0)
        throw Error(fmt::format(
            "env '{}' (env index {}) truncated {} episodes within one {}-step rollout but declares no time limit "
            "(mpirl then keeps room for {} truncation per rollout). Declare it, and mpirl sizes its bootstrap "
            "slots from it: gymnasium.make(..., max_episode_steps=N), a gymnasium.wrappers.TimeLimit around each "
            "env, or a `max_episode_steps` attribute on the env or on the vector env your factory returns",
            spec_.id, e, k + 1, T_, K));
      throw Error(fmt::format("env '{}' (env index {}) truncated {} episodes within one {}-step rollout; its spec "
                              "declares max_episode_steps = {}, which allows at most {}",
                              spec_.id, e, k + 1, T_, spec_.max_episode_steps, K));
    }
    const int local = int(e - groups_.g[size_t(g)].first);
    std::memcpy(u8(s, Seq::BootObs) + (e * K + k) * OB, venv_[size_t(g)]->final_obs_bytes(local), size_t(OB));
    if (S > 0)
      std::memcpy(f32(s, Seq::BootState) + (e * K + k) * S, policy_->state(int(e)), size_t(S) * sizeof(float));
    field<int32_t>(s, Seq::BootStep)[e * K + k] = int32_t(t);
  }

  void send(Slot& s) {
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
    --credits_;
    env_steps_sent_ += E_ * T_;
  }

  // The last observation of a rollout is the first of the next.
  void carry_over(Slot& from, Slot& to) {
    uint8_t* fi = u8(from, Seq::IsInit);
    uint8_t* ti = u8(to, Seq::IsInit);
    for (int64_t e = 0; e < E_; ++e) {
      std::memcpy(obs_row(to, e, 0), obs_row(from, e, T_), size_t(spec_.obs_bytes()));
      ti[e * (T_ + 1)] = fi[e * (T_ + 1) + T_];
    }
  }

  // Stop: every inference request is settled, every rollout already sent is delivered, then
  // ActorDone, then wait for its ack.
  void finish() {
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

  const Config& cfg_;
  const Comms& comms_;
  const int64_t E_, T_;
  const uint64_t seed_;  // of a resumed run's segment
  Groups groups_;
  std::vector<std::unique_ptr<envs::VectorEnv>> venv_;  // one per env group; built-in or Python
  envs::EnvSpec spec_;
  std::unique_ptr<SeqLayout> layout_;
  std::unique_ptr<GroupPolicy> policy_;  // local or central inference (actor/group_policy.h)
  std::vector<Slot> slots_;
  std::vector<int64_t> boot_count_;  // per env: boot slots used in the rollout being collected
  MsgBuffer ctl_;  // the posted receive of the replay's control messages (4 KiB)
  int credits_ = 0;
  int64_t min_version_ = -1;
  uint64_t seq_ = 0;
  int64_t env_steps_sent_ = 0;  // counted here; the replay and the learners count their own
  std::unique_ptr<ObsCodec> codec_;  // compressed observations (actor.compress_obs), else null
  bool stop_ = false, done_acked_ = false;
};

}  // namespace

void run_actor(const Config& cfg, const Comms& comms, int64_t segment) {
  torch::set_num_threads(cfg.actor.threads);
  // Central inference: every step waits for a reply, with sleeps of 10-100 us; Linux's default
  // 50 us timer slack would add 50 us to each.
  if (comms.layout.central()) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Actor a(cfg, comms, segment);
  a.run();
}

}  // namespace mpirl::actor
