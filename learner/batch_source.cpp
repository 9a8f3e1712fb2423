#include "learner/batch_source.h"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace mpirl::learner {

using wire::DType;

// Host copies of one batch, time-major (pinned when the device is CUDA), and the event that says
// the device copies out of them have finished (so they can be refilled).
struct BatchSource::Staging {
  std::vector<torch::Tensor> host;  // indexed by position in the layout's fields
  std::unique_ptr<c10::Event> copied;
};

BatchSource::BatchSource(const Config& cfg, const Comms& comms, const SeqLayout& layout, const envs::EnvSpec& spec,
                         torch::Device device)
    : cfg_(cfg), comms_(comms), layout_(layout), spec_(spec), device_(device), replay_(comms.layout.replay_rank()),
      B_(cfg.learner.batch_size), prioritized_(cfg.replay.selector == "prioritized"),
      ring_(size_t(cfg.learner.prefetch)) {
  const size_t cap = sample_reply_capacity(layout_, B_, comms.layout.learners);
  for (auto& r : ring_) r.buf.resize(cap);
  for (int i = 0; i < 2; ++i) {
    auto s = std::make_unique<Staging>();
    if (device_.is_cuda()) s->copied = std::make_unique<c10::Event>(device_.type());
    staging_.push_back(std::move(s));
  }
  if (device_.is_cuda()) {
    copy_stream_ = c10::impl::VirtualGuardImpl(device_.type()).getStreamFromGlobalPool(device_);
    staged_ = std::make_unique<c10::Event>(device_.type());
  }
}

BatchSource::~BatchSource() = default;

void BatchSource::post(Recv& r) {
  MPIRL_MPI(MPI_Irecv(r.buf.data(), int(r.buf.size()), MPI_BYTE, replay_, kTagLearnerReply, comms_.world, &r.req));
}

void BatchSource::request() { send_small(wire::Kind::SampleRequest); }

void BatchSource::start() {
  // Receives first: replies match them in posting order, one per request.
  for (auto& r : ring_) post(r);
  for (size_t i = 0; i < ring_.size(); ++i) request();
}

void BatchSource::progress() {
  flush_priorities(false);
  sends_.progress();
  int flag = 0;
  MPIRL_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms_.world, &flag, MPI_STATUS_IGNORE));
}

Batch* BatchSource::next(int64_t version, const std::function<bool()>& keep_waiting) {
  Recv& r = ring_[head_];
  Backoff b;
  MPI_Status st;
  for (;;) {
    int done = 0;
    MPIRL_MPI(MPI_Test(&r.req, &done, &st));
    if (done) break;
    flush_priorities(false);
    sends_.progress();
    if (!keep_waiting()) return nullptr;
    b.idle();
  }
  int count = 0;
  MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
  auto msg = wire::decode(r.buf.data(), size_t(count), replay_,
                          {wire::Kind::SampleReply, wire::Kind::CheckpointDone, wire::Kind::ReplayBusy});
  if (take_control(msg)) return next(version, keep_waiting);
  stage(msg, version);  // copies everything out of r.buf
  // The buffer is free again: post its receive and ask for the batch after the ones in flight.
  post(r);
  request();
  head_ = (head_ + 1) % ring_.size();
  return &batch_;
}

bool BatchSource::take_control(const wire::Message& msg) {
  const auto kind = msg.env.kind;
  if (kind != wire::Kind::CheckpointDone && kind != wire::Kind::ReplayBusy) return false;
  if (kind == wire::Kind::CheckpointDone && !msg.env.has_status)
    throw Error(fmt::format("CheckpointDone from rank {} carries no status", replay_));
  if (!msg.env.arrays.empty())
    throw Error(fmt::format("{} from rank {} carries {} arrays, expected none", wire::kind_name(kind), replay_,
                            msg.env.arrays.size()));
  const ReplayStatus status = msg.env.status;
  post(ring_[head_]);  // no request behind it: the ring keeps one receive per reply in flight
  head_ = (head_ + 1) % ring_.size();
  if (kind == wire::Kind::CheckpointDone) {
    if (on_checkpoint_done) on_checkpoint_done(status);
  } else if (on_replay_busy) {
    on_replay_busy();
  }
  return true;
}

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

void BatchSource::stage(const wire::Message& msg, int64_t version) {
  const int64_t B = layout_.check(msg, replay_);
  if (B != B_) throw Error(fmt::format("SampleReply from rank {} holds {} sequences, expected learner.batch_size = {}",
                                       replay_, B, B_));
  if (!msg.env.has_status) throw Error(fmt::format("SampleReply from rank {} carries no replay status", replay_));
  received_ += B;
  const size_t nf = layout_.fields().size();
  if (msg.env.arrays.size() != nf + 6)
    throw Error(fmt::format("SampleReply from rank {} has {} arrays, expected {}", replay_, msg.env.arrays.size(), nf + 6));
  const int64_t m = msg.desc(nf).shape.empty() ? -1 : msg.desc(nf).shape[0];
  expect(msg, nf, "episode_return", DType::F32, {m}, replay_);
  expect(msg, nf + 1, "episode_length", DType::I32, {m}, replay_);
  expect(msg, nf + 2, "slot", DType::I64, {B}, replay_);
  expect(msg, nf + 3, "generation", DType::I64, {B}, replay_);
  expect(msg, nf + 4, "weight", DType::F32, {B}, replay_);
  expect(msg, nf + 5, "insert_seq", DType::I64, {B}, replay_);

  Batch& out = batch_;
  out.status = msg.env.status;
  out.episode_returns.assign(msg.array<float>(nf), msg.array<float>(nf) + m);
  out.episode_lengths.assign(msg.array<int32_t>(nf + 1), msg.array<int32_t>(nf + 1) + m);
  out.slots.assign(msg.array<int64_t>(nf + 2), msg.array<int64_t>(nf + 2) + B);
  out.generations.assign(msg.array<int64_t>(nf + 3), msg.array<int64_t>(nf + 3) + B);
  out.insert_seqs.assign(msg.array<int64_t>(nf + 5), msg.array<int64_t>(nf + 5) + B);
  const char* payload = msg.payload;
  const int64_t* ver = layout_.ptr<int64_t>(payload, Seq::Version, B);
  out.versions.assign(ver, ver + B);

  // Policy lag per item; items above learner.max_policy_lag are masked out of the loss.
  std::vector<float> keep(size_t(B), 1.f);
  out.kept = 0;
  out.too_old = out.lag_sum = out.lag_max = out.lag_known = out.lag_unknown = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t lag = version - ver[i];
    if (out.insert_seqs[size_t(i)] < out.status.restored_seq_end || ver[i] < 0 || lag < 0) {
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
  Staging& s = *staging_[stage_next_];
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
  t.weights = prioritized_ ? up(torch::from_blob(const_cast<float*>(msg.array<float>(nf + 4)), {B}, f32))
                           : torch::Tensor();
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
        if (tt >= T) throw Error(fmt::format("SampleReply from rank {}: boot_step {} outside the {} steps", replay_, tt, T));
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
