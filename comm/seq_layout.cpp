#include "comm/seq_layout.h"

#include <fmt/ranges.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/r2d2_options.h"

namespace mpirl {

using wire::DType;

int64_t boot_slots(const envs::EnvSpec& spec, int64_t T) {
  if (spec.max_episode_steps == 0) return 0;
  // A limit not declared: room for one truncation per env and rollout, which any episode longer
  // than the rollout needs (the actor names the fix when an env truncates more often).
  if (spec.max_episode_steps < 0) return std::min<int64_t>(T, 1);
  return std::min(T, (T + spec.max_episode_steps - 1) / spec.max_episode_steps);
}

SeqLayout::SeqLayout(const envs::EnvSpec& spec, int64_t T, int64_t state_size, bool initial_priority)
    : T_(T), S_(state_size), K_(mpirl::boot_slots(spec, T)) {
  const DType obs_dtype = spec.obs_uint8 ? DType::U8 : DType::F32;
  auto with_obs = [&](int64_t lead) {
    std::vector<int64_t> s{lead};
    s.insert(s.end(), spec.obs_shape.begin(), spec.obs_shape.end());
    return s;
  };
  fields_ = {
      {Seq::Obs, "obs", obs_dtype, with_obs(T + 1)},
      {Seq::IsInit, "is_init", DType::U8, {T + 1}},
      spec.discrete ? SeqField{Seq::Action, "action", DType::I64, {T}}
                    : SeqField{Seq::Action, "action", DType::F32, {T, spec.action_dim}},
      {Seq::Reward, "reward", DType::F32, {T}},
      {Seq::Terminated, "terminated", DType::U8, {T}},
      {Seq::Truncated, "truncated", DType::U8, {T}},
      {Seq::Logp, "logp", DType::F32, {T}},
      {Seq::Dist, "dist", DType::F32, {T, spec.dist_size()}},
  };
  if (K_ > 0) {
    fields_.push_back({Seq::BootObs, "boot_obs", obs_dtype, with_obs(K_)});
    if (S_ > 0) fields_.push_back({Seq::BootState, "boot_state", DType::F32, {K_, S_}});
    fields_.push_back({Seq::BootStep, "boot_step", DType::I32, {K_}});
  }
  fields_.push_back({Seq::Version, "version", DType::I64, {}});
  fields_.push_back({Seq::Actor, "actor", DType::I32, {}});
  fields_.push_back({Seq::EnvIndex, "env_index", DType::I32, {}});
  if (S_ > 0) fields_.push_back({Seq::State0, "state0", DType::F32, {S_}});
  if (initial_priority) fields_.push_back({Seq::InitialPriority, "initial_priority", DType::F32, {}});
  pos_.fill(-1);
  for (size_t i = 0; i < fields_.size(); ++i) {
    auto& f = fields_[i];
    pos_[size_t(f.id)] = int(i);
    size_t n = 1;
    for (auto d : f.shape) n *= size_t(d);
    f.bytes = n * wire::dtype_size(f.dtype);
  }
}

size_t SeqLayout::position(Seq f) const {
  MPIRL_CHECK(has(f), "sequence field {} is not part of this layout", int(f));
  return size_t(pos_[size_t(f)]);
}

size_t SeqLayout::bytes_per_sequence() const {
  size_t n = 0;
  for (auto& f : fields_) n += f.bytes;
  return n;
}

std::vector<wire::ArrayDesc> SeqLayout::arrays(int64_t n, bool with_stats, int64_t m) const {
  std::vector<wire::ArrayDesc> out;
  for (auto& f : fields_) {
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    out.push_back({f.name, f.dtype, shape});
  }
  if (with_stats) {
    out.push_back({"episode_return", DType::F32, {m}});
    out.push_back({"episode_length", DType::I32, {m}});
  }
  return out;
}

size_t SeqLayout::field_offset(size_t f, int64_t n) const {
  size_t off = 0;
  for (size_t i = 0; i < f; ++i) off = wire::align_up(off + fields_[i].bytes * size_t(n));
  return off;
}

int64_t SeqLayout::check(const wire::Message& msg, int sender) const {
  const auto& a = msg.env.arrays;
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("{} from rank {} does not match the run's sequence layout (T={}): {}",
                            wire::kind_name(msg.env.kind), sender, T_, what));
  };
  if (a.size() < fields_.size()) bad(fmt::format("{} arrays, expected at least {}", a.size(), fields_.size()));
  int64_t n = a[0].shape.empty() ? -1 : a[0].shape[0];
  for (size_t i = 0; i < fields_.size(); ++i) {
    const auto& f = fields_[i];
    std::vector<int64_t> want{n};
    want.insert(want.end(), f.shape.begin(), f.shape.end());
    if (a[i].name != f.name || a[i].dtype != f.dtype || a[i].shape != want)
      bad(fmt::format("array {} is '{}' {} [{}], expected '{}' {} [{}]", i, a[i].name, wire::dtype_name(a[i].dtype),
                      fmt::join(a[i].shape, ","), f.name, wire::dtype_name(f.dtype), fmt::join(want, ",")));
  }
  return n;
}

void SeqLayout::copy_sequence(const char* src, int64_t n_src, int64_t i, char* dst, int64_t n_dst, int64_t j) const {
  size_t so = 0, d = 0;
  for (auto& f : fields_) {
    std::memcpy(dst + d + f.bytes * size_t(j), src + so + f.bytes * size_t(i), f.bytes);
    so = wire::align_up(so + f.bytes * size_t(n_src));
    d = wire::align_up(d + f.bytes * size_t(n_dst));
  }
}

std::vector<wire::ArrayDesc> sample_reply_arrays(const SeqLayout& layout, int64_t B, int64_t m) {
  auto a = layout.arrays(B, true, m);
  a.push_back({"slot", DType::I64, {B}});
  a.push_back({"generation", DType::I64, {B}});
  a.push_back({"weight", DType::F32, {B}});
  a.push_back({"insert_seq", DType::I64, {B}});
  a.push_back({"prob", DType::F64, {B}});  // each item's probability of a draw within its shard
  return a;
}

size_t sample_reply_payload_offset(int learners) {
  return wire::align_up(wire::kHeaderRegion + 8 * size_t(learners) + 2 * kMaxStatusString);
}

size_t sample_reply_capacity(const SeqLayout& layout, int64_t B, int learners) {
  return sample_reply_payload_offset(learners) +
         wire::payload_bytes(sample_reply_arrays(layout, B, kMaxEpisodeStatsPerReply));
}

int64_t rollout_overlap(const Config& cfg) { return cfg.learner.algo == "r2d2" ? cfg.r2d2.burn_in : 0; }

bool seq_layout_priority(const Config& cfg) {
  return r2d2_actor_priorities(cfg);
}

}  // namespace mpirl
