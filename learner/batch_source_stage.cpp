// BatchSource: each SampleReply checked, the shards' replies joined into one batch, and the batch
// staged for the device (learner/batch_source.h).
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstring>

#include "comm/shard_sampling.h"
#include "core/error.h"
#include "learner/batch_source.h"
#include "learner/batch_staging.h"

namespace mpirl::learner {

using wire::DType;

namespace {
// Checks the array at position i of a reply: name, dtype and shape; throws naming the replay.
void expect(const wire::Message& msg, size_t i, const char* name, DType dt, const std::vector<int64_t>& shape,
            int sender) {
  const auto& a = msg.env.arrays;
  if (i >= a.size() || a[i].name != name || a[i].dtype != dt || a[i].shape != shape)
    throw Error(fmt::format("SampleReply from rank {}: array {} should be '{}' {} of {} elements", sender, i, name,
                            wire::dtype_name(dt), shape.empty() ? 1 : shape[0]));
}
}  // namespace

BatchSource::Reply BatchSource::check_reply(const wire::Message& msg, int rank, int64_t expected) const {
  const int64_t B = layout_.check(msg, rank);
  if (B != expected)
    throw Error(fmt::format("SampleReply from rank {} holds {} sequences, {} were asked for (learner.batch_size = {})",
                            rank, B, expected, B_));
  if (!msg.env.has_status) throw Error(fmt::format("SampleReply from rank {} carries no replay status", rank));
  const size_t nf = layout_.fields().size();
  if (msg.env.arrays.size() != nf + 7)
    throw Error(fmt::format("SampleReply from rank {} has {} arrays, expected {}", rank, msg.env.arrays.size(), nf + 7));
  const int64_t m = msg.desc(nf).shape.empty() ? -1 : msg.desc(nf).shape[0];
  expect(msg, nf, "episode_return", DType::F32, {m}, rank);
  expect(msg, nf + 1, "episode_length", DType::I32, {m}, rank);
  expect(msg, nf + 2, "slot", DType::I64, {B}, rank);
  expect(msg, nf + 3, "generation", DType::I64, {B}, rank);
  expect(msg, nf + 4, "weight", DType::F32, {B}, rank);
  expect(msg, nf + 5, "insert_seq", DType::I64, {B}, rank);
  expect(msg, nf + 6, "prob", DType::F64, {B}, rank);
  Reply r;
  r.payload = msg.payload;
  r.n = B;
  r.m = m;
  r.returns = msg.array<float>(nf);
  r.lengths = msg.array<int32_t>(nf + 1);
  r.slots = msg.array<int64_t>(nf + 2);
  r.generations = msg.array<int64_t>(nf + 3);
  r.weights = msg.array<float>(nf + 4);
  r.insert_seqs = msg.array<int64_t>(nf + 5);
  r.probs = msg.array<double>(nf + 6);
  r.status = &msg.env.status;
  return r;
}

void BatchSource::stage(const std::vector<Reply>& parts, const Split& split, int64_t version) {
  const int64_t B = B_;
  received_ += B;
  Batch& out = batch_;
  out.status = merged_status();
  out.episode_returns.clear();
  out.episode_lengths.clear();
  out.slots.clear();
  out.generations.clear();
  out.insert_seqs.clear();
  out.shards.clear();
  std::vector<uint8_t> restored;  // items collected by an earlier run (a restored item): lag unknown
  std::vector<double> probs;
  for (auto& sh : shards_)  // held while a checkpoint was in progress, now done
    if (!sh.checkpoint_done && !sh.held_returns.empty()) {
      out.episode_returns.insert(out.episode_returns.end(), sh.held_returns.begin(), sh.held_returns.end());
      out.episode_lengths.insert(out.episode_lengths.end(), sh.held_lengths.begin(), sh.held_lengths.end());
      sh.held_returns.clear();
      sh.held_lengths.clear();
    }
  for (size_t k = 0; k < parts.size(); ++k) {
    const Reply& p = parts[k];
    Shard& sh = shards_[k];
    auto& rets = sh.checkpoint_done ? sh.held_returns : out.episode_returns;
    auto& lens = sh.checkpoint_done ? sh.held_lengths : out.episode_lengths;
    rets.insert(rets.end(), p.returns, p.returns + p.m);
    lens.insert(lens.end(), p.lengths, p.lengths + p.m);
    out.slots.insert(out.slots.end(), p.slots, p.slots + p.n);
    out.generations.insert(out.generations.end(), p.generations, p.generations + p.n);
    out.insert_seqs.insert(out.insert_seqs.end(), p.insert_seqs, p.insert_seqs + p.n);
    probs.insert(probs.end(), p.probs, p.probs + p.n);
    out.shards.insert(out.shards.end(), size_t(p.n), int(k));
    for (int64_t i = 0; i < p.n; ++i) restored.push_back(p.insert_seqs[i] < p.status->restored_seq_end);
  }
  // One shard: its payload as it came. Several: their sequences joined in shard order.
  const char* payload = parts[0].payload;
  std::vector<float> weights;
  if (parts.size() == 1) {
    weights.assign(parts[0].weights, parts[0].weights + B);
  } else {
    const size_t nf = layout_.fields().size();
    merged_.resize(layout_.field_offset(nf, B));
    int64_t j = 0;
    for (const Reply& p : parts)
      for (int64_t i = 0; i < p.n; ++i) layout_.copy_sequence(p.payload, p.n, i, merged_.data(), B, j++);
    payload = merged_.data();
    if (prioritized_) {
      int64_t items = 0;
      for (const Reply& p : parts) items += p.status->fill;
      // The importance exponent one buffer would use: annealed over the samples of every shard.
      const double b0 = cfg_.replay.importance_exponent, n = double(cfg_.replay.importance_anneal_items);
      const double beta = n > 0 ? b0 + (1.0 - b0) * std::min(1.0, double(out.status.sampled) / n) : b0;
      weights = global_weights(probs, out.shards, split.masses, std::max<int64_t>(items, 1), beta);
    } else {
      weights.assign(size_t(B), 1.f);
    }
  }
  const int64_t* ver = layout_.ptr<int64_t>(payload, Seq::Version, B);
  out.versions.assign(ver, ver + B);
  out.restored = std::count(restored.begin(), restored.end(), uint8_t(1));

  // Policy lag per item; items above learner.max_policy_lag are masked out of the loss.
  std::vector<float> keep(size_t(B), 1.f);
  out.kept = 0;
  out.too_old = out.lag_sum = out.lag_max = out.lag_known = out.lag_unknown = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t lag = version - ver[i];
    if (restored[size_t(i)] || ver[i] < 0 || lag < 0) {
      ++out.lag_unknown;  // collected by another run (a restored item): its version is not ours
    } else {
      out.lag_sum += lag;
      out.lag_max = std::max(out.lag_max, lag);
      ++out.lag_known;
      if (cfg_.learner.max_policy_lag > 0 && lag > cfg_.learner.max_policy_lag) {
        keep[size_t(i)] = 0.f;
        ++out.too_old;
        continue;
      }
    }
    ++out.kept;
  }

  // Host staging: [B, T, ...] on the wire -> [T, B, ...] in the staging tensors. On CUDA the
  // copies to the device go on the copy stream; the compute stream waits for them on the device.
  const bool cuda = device_.is_cuda();
  const c10::Stream compute = c10::impl::VirtualGuardImpl(device_.type()).getStream(device_);
  std::optional<c10::StreamGuard> on_copy_stream;
  if (cuda) on_copy_stream.emplace(*copy_stream_);
  BatchStaging& s = *staging_[stage_next_];
  stage_next_ = (stage_next_ + 1) % staging_.size();
  if (s.copied && s.copied->was_marked_for_recording()) s.copied->synchronize();
  const auto& fields = layout_.fields();
  if (s.host.empty()) s.host.resize(fields.size());
  auto pinned = torch::TensorOptions().pinned_memory(cuda);
  auto scalar = [](DType d) {
    switch (d) {
      case DType::F32: return torch::kFloat32;
      case DType::F64: return torch::kFloat64;
      case DType::I32: return torch::kInt32;
      case DType::I64: return torch::kInt64;
      case DType::U8: return torch::kUInt8;
    }
    return torch::kUInt8;
  };
  // Time-major copy of a [B, L, ...] field (transpose = false: a per-sequence field, kept [B, ...]).
  auto host_field = [&](Seq id, bool transpose) {
    const size_t pos = layout_.position(id);
    const auto& f = fields[pos];
    std::vector<int64_t> shape{B};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    auto src = torch::from_blob(const_cast<char*>(payload) + layout_.field_offset(pos, B), shape, scalar(f.dtype));
    if (transpose) src = src.transpose(0, 1);
    auto& h = s.host[pos];
    if (!h.defined() || h.sizes() != src.sizes()) h = torch::empty(src.sizes(), pinned.dtype(src.scalar_type()));
    h.copy_(src);
    return h;
  };
  auto dev = [&](const torch::Tensor& h) { return h.to(device_, /*non_blocking=*/true); };
  // Small host tensors that view memory this call does not own (a local vector, the MPI receive
  // buffer handed back right after): always copied. Pinned first on CUDA, so their copies do not
  // wait on the host; on the CPU `to(device_)` alone would return the same view.
  auto up = [&](const torch::Tensor& h) {
    return cuda ? h.pin_memory().to(device_, true) : h.to(device_, h.scalar_type(), false, /*copy=*/true);
  };
  auto f32 = torch::kFloat32;
  TrainBatch& t = out.train;
  t.obs = dev(host_field(Seq::Obs, true));  // uint8 pixels stay uint8: the policy converts them on the device
  t.is_init = dev(host_field(Seq::IsInit, true)).to(f32);
  t.actions = dev(host_field(Seq::Action, true));
  t.rewards = dev(host_field(Seq::Reward, true));
  t.terminated = dev(host_field(Seq::Terminated, true)).to(f32);
  t.truncated = dev(host_field(Seq::Truncated, true)).to(f32);
  t.behaviour_logp = dev(host_field(Seq::Logp, true));
  t.state0 = layout_.has(Seq::State0) ? dev(host_field(Seq::State0, false)) : torch::Tensor();
  // Importance weights (prioritized replay) and the lag mask (the losses average over kept items).
  t.weights = prioritized_ ? up(torch::from_blob(weights.data(), {B}, f32)) : torch::Tensor();
  t.keep = out.too_old > 0 ? up(torch::from_blob(keep.data(), {B}, f32)) : torch::Tensor();

  out.truncations = 0;
  {
    const uint8_t* tr = layout_.ptr<uint8_t>(payload, Seq::Truncated, B);
    const uint8_t* te = layout_.ptr<uint8_t>(payload, Seq::Terminated, B);
    for (int64_t i = 0; i < B * layout_.T(); ++i) out.truncations += tr[i] && !te[i];
  }
  // Truncation bootstraps: the used boot slots (boot_step >= 0), gathered on the host.
  BootInputs& boot = out.boot;
  boot = BootInputs{};
  if (layout_.has(Seq::BootStep)) {
    const int64_t K = layout_.boot_slots(), T = layout_.T();
    const int32_t* step = layout_.ptr<int32_t>(payload, Seq::BootStep, B);
    std::vector<int64_t> rows, ts, bs;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const int32_t tt = step[i * K + k];
        if (tt < 0) continue;
        if (tt >= T)
          throw Error(fmt::format("SampleReply from replay rank {}: boot_step {} outside the {} steps",
                                  shards_[size_t(out.shards[size_t(i)])].rank, tt, T));
        rows.push_back(i * K + k);
        ts.push_back(tt);
        bs.push_back(i);
      }
    boot.count = int64_t(rows.size());
    if (boot.count > 0) {
      auto idx = torch::tensor(rows, torch::kInt64);
      const auto& fo = layout_.field(Seq::BootObs);
      std::vector<int64_t> oshape{B * K};
      oshape.insert(oshape.end(), fo.shape.begin() + 1, fo.shape.end());
      auto obs = torch::from_blob(const_cast<char*>(payload) + layout_.offset(Seq::BootObs, B), oshape,
                                  scalar(fo.dtype));
      boot.obs = up(obs.index_select(0, idx));
      if (layout_.has(Seq::BootState)) {
        auto st = torch::from_blob(const_cast<char*>(payload) + layout_.offset(Seq::BootState, B),
                                   {B * K, layout_.state_size()}, f32);
        boot.state = up(st.index_select(0, idx));
      }
      boot.t = up(torch::tensor(ts, torch::kInt64));
      boot.b = up(torch::tensor(bs, torch::kInt64));
    }
  }
  if (!cuda) return;
  s.copied->record(*copy_stream_);
  staged_->record(*copy_stream_);
  staged_->block(compute);  // the update waits for the copies on the device, not the host
  // Allocated on the copy stream, used on the compute stream: the caching allocator must not hand
  // their memory out again before the compute stream is done with them.
  for (const torch::Tensor* d : {&t.obs, &t.is_init, &t.actions, &t.rewards, &t.terminated, &t.truncated,
                                 &t.behaviour_logp, &t.state0, &t.weights, &t.keep, &boot.obs, &boot.state, &boot.t,
                                 &boot.b})
    if (d->defined()) d->record_stream(compute);
}

}  // namespace mpirl::learner
