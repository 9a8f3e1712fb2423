#include "actor/actor.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/acting.h"
#include "models/policy.h"
#include "core/error.h"
#include "core/fault.h"
#include "comm/param_channel.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "comm/wire.h"

namespace mpirl::actor {
namespace {

// One preallocated rollout message: header region, then the payload for E sequences and room for
// up to E*T finished-episode statistics.
// (A MsgBuffer: kept for MPI if the actor dies with its send in flight.)
struct Slot : MsgBuffer {
  char* payload() { return buf.data() + wire::kHeaderRegion; }
};

class Actor {
 public:
  // A resumed run (segment > 0) mixes its segment into the seeds: envs start new episodes with
  // new randomness rather than repeating the first segment's (env states are not checkpointed).
  Actor(const Config& cfg, const Comms& comms, int64_t segment)
      : cfg_(cfg), comms_(comms), E_(cfg.env.num_envs), T_(cfg.actor.rollout_len), seed_(envs::mix_seed(cfg.run.seed, 0x5e9u + uint64_t(segment))),
        venv_(envs::make_vector_env(
            cfg, cfg.env.num_envs,
            envs::mix_seed(segment ? seed_ : cfg.run.seed, 1000003ull + uint64_t(comms.layout.actor_index(comms.rank))))),
        spec_(venv_->spec()), layout_(SeqLayout(spec_, cfg.actor.rollout_len, models::state_size(cfg, spec_))), policy_(spec_, models::model_options(cfg)),
        params_(comms.publish, models::num_params(policy_), cfg.actor.param_tests),
        acting_(policy_, E_, envs::mix_seed(segment ? seed_ : cfg.run.seed, 77 + uint64_t(comms.rank))) {
    policy_->eval();
    MPIRL_CHECK(policy_->state_size() == layout_.state_size(), "core state size {} != layout's {}",
                policy_->state_size(), layout_.state_size());
    credits_ = cfg.actor.max_inflight;
    flat_.resize(size_t(models::num_params(policy_)));
    size_t payload = wire::payload_bytes(layout_.arrays(E_, true, E_ * T_));
    slots_.resize(size_t(cfg.actor.max_inflight));
    for (auto& s : slots_) s.buf.resize(wire::kHeaderRegion + payload);
    boot_count_.assign(size_t(E_), 0);
    ctl_.buf.resize(4096);
  }

  void run() {
    c10::InferenceMode inference;  // no autograd bookkeeping (version counters, views) per step
    post_ctl();
    params_.post();
    Backoff b;
    while (!poll_params()) {
      if (stop_) return finish();
      b.idle();
    }
    Slot* s = &slots_[0];
    venv_->reset(obs_row(*s, 0, 0), (T_ + 1) * spec_.obs_size(), u8(*s, Seq::IsInit), T_ + 1);
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
  T* field(Slot& s, Seq f) { return layout_.ptr<T>(s.payload(), f, E_); }
  float* f32(Slot& s, Seq f) { return field<float>(s, f); }
  uint8_t* u8(Slot& s, Seq f) { return field<uint8_t>(s, f); }
  // Observation t of env e in a slot (float32 or uint8 as the spec says).
  uint8_t* obs_row(Slot& s, int64_t e, int64_t t) {
    return u8(s, Seq::Obs) + (e * (T_ + 1) + t) * spec_.obs_bytes();
  }

  // Tests the parameter broadcast; true when new parameters were loaded.
  bool poll_params() {
    int64_t v = 0;
    switch (params_.poll(flat_.data(), &v)) {
      case ParamChannel::Got::Params:
        models::read_flat(policy_, flat_.data());
        version_ = v;
        return true;
      case ParamChannel::Got::Stop:
        stop_ = true;
        return false;
      case ParamChannel::Got::Nothing:
        return false;
    }
    return false;
  }

  void post_ctl() { MPIRL_MPI(MPI_Irecv(ctl_.buf.data(), int(ctl_.buf.size()), MPI_BYTE, comms_.layout.replay_rank(),
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
      poll_params();
      if (stop_) return false;
      int done = 1;
      if (s.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE));
      if (done && credits_ > 0) return true;
      b.idle();
    }
  }

  // Steps T times writing straight into the slot. False if a Stop arrived mid-rollout.
  bool collect(Slot& s) {
    const int64_t D = spec_.obs_size(), L = spec_.dist_size();
    float* dist = f32(s, Seq::Dist);
    float* logp = f32(s, Seq::Logp);
    void* act = field<char>(s, Seq::Action);
    min_version_ = version_;
    // The core state carried across rollouts; the learner starts sequence mode from this copy.
    if (const auto& st = acting_.state(); st.defined())
      std::memcpy(f32(s, Seq::State0), st.contiguous().data_ptr<float>(), size_t(st.numel()) * sizeof(float));
    const int64_t K = layout_.boot_slots();
    if (K > 0) std::fill_n(field<int32_t>(s, Seq::BootStep), E_ * K, -1);
    std::fill(boot_count_.begin(), boot_count_.end(), 0);
    const uint8_t* init = u8(s, Seq::IsInit);
    for (int64_t t = 0; t < T_; ++t) {
      fault_point();
      poll_params();
      if (stop_) return false;
      min_version_ = std::min(min_version_, version_);
      // [E, obs...] straight from the slot (the policy converts uint8 pixels itself); the
      // distribution rows and log-probabilities land in the slot.
      acting_.step(models::obs_rows(spec_, obs_row(s, 0, t), E_, (T_ + 1) * D), init + t, T_ + 1,
                   {dist + t * L, T_ * L, logp + t, T_});
      acting_.write_actions(act, t, T_);
      envs::StepOutputs o;
      o.obs = obs_row(s, 0, t + 1);
      o.obs_stride = (T_ + 1) * D;
      o.is_init = u8(s, Seq::IsInit) + t + 1;
      o.is_init_stride = T_ + 1;
      o.reward = f32(s, Seq::Reward) + t;
      o.terminated = u8(s, Seq::Terminated) + t;
      o.truncated = u8(s, Seq::Truncated) + t;
      o.scalar_stride = T_;
      venv_->step(spec_.discrete ? acting_.discrete_actions() : nullptr, spec_.discrete ? nullptr : acting_.box_actions(), o);
      for (int64_t e = 0; e < E_; ++e)
        if (o.truncated[e * T_] && !o.terminated[e * T_]) record_truncation(s, e, t);
    }
    return true;
  }

  // A truncated episode bootstraps from the value of its last state, which the learner computes
  // with its current parameters: the actor sends that observation and its core state there.
  void record_truncation(Slot& s, int64_t e, int64_t t) {
    const int64_t K = layout_.boot_slots(), S = layout_.state_size(), OB = spec_.obs_bytes();
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
    std::memcpy(u8(s, Seq::BootObs) + (e * K + k) * OB, venv_->final_obs_bytes(int(e)), size_t(OB));
    if (S > 0) {
      auto st = acting_.state()[e].contiguous();
      std::memcpy(f32(s, Seq::BootState) + (e * K + k) * S, st.data_ptr<float>(), size_t(S) * sizeof(float));
    }
    field<int32_t>(s, Seq::BootStep)[e * K + k] = int32_t(t);
  }

  void send(Slot& s) {
    auto stats = venv_->take_finished();
    const int64_t m = int64_t(stats.size());
    MPIRL_CHECK(m <= E_ * T_, "{} episodes in one rollout", m);
    auto arrays = layout_.arrays(E_, true, m);
    std::vector<size_t> offsets;
    wire::payload_bytes(arrays, &offsets);
    const size_t nf = layout_.fields().size();
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
    env.arrays = std::move(arrays);
    size_t total = wire::write_header(s.buf.data(), wire::kHeaderRegion, env);
    MPIRL_MPI(MPI_Isend(s.buf.data(), int(total), MPI_BYTE, comms_.layout.replay_rank(), kTagRollout, comms_.world, &s.req));
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

  // Stop: every rollout already sent is delivered, then ActorDone, then wait for its ack.
  void finish() {
    for (auto& s : slots_) wait_request(s.req, [&] { poll_ctl(); });
    wire::Envelope env;
    env.kind = wire::Kind::ActorDone;
    env.sender = comms_.rank;
    env.seq = seq_++;
    env.arrays = {{"env_steps", wire::DType::I64, {1}}};
    MsgBuffer done;  // poll_ctl() may throw while the send is pending
    done.buf = wire::build_frame(env, &env_steps_sent_, sizeof(env_steps_sent_));
    MPIRL_MPI(MPI_Isend(done.buf.data(), int(done.buf.size()), MPI_BYTE, comms_.layout.replay_rank(), kTagRollout,
                        comms_.world, &done.req));
    wait_request(done.req, [&] { poll_ctl(); });
    for (Backoff b; !poll_ctl();) b.idle();
    spdlog::debug("actor {}: done after {} rollouts", comms_.rank, seq_ - 1);
  }

  const Config& cfg_;
  const Comms& comms_;
  const int64_t E_, T_;
  const uint64_t seed_;  // of a resumed run's segment
  std::unique_ptr<envs::VectorEnv> venv_;  // built-in or Python
  envs::EnvSpec spec_;
  SeqLayout layout_;
  models::Policy policy_;
  ParamChannel params_;
  models::Acting acting_;  // the policy's step, sampling and log-probs (models/acting.h)
  std::vector<float> flat_;
  std::vector<Slot> slots_;
  std::vector<int64_t> boot_count_;  // per env: boot slots used in the rollout being collected
  MsgBuffer ctl_;  // the posted receive of the replay's control messages (4 KiB)
  int credits_ = 0;
  int64_t version_ = -1, min_version_ = -1;
  uint64_t seq_ = 0;
  int64_t env_steps_sent_ = 0;  // counted here; the replay and the learners count their own
  bool stop_ = false, done_acked_ = false;
};

}  // namespace

void run_actor(const Config& cfg, const Comms& comms, int64_t segment) {
  torch::set_num_threads(cfg.actor.threads);
  Actor a(cfg, comms, segment);
  a.run();
}

}  // namespace mpirl::actor
