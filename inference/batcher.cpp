#include "inference/batcher.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/error.h"

namespace mpirl::inference {

int BatchStats::bucket(int64_t rows) {
  int b = 0;
  for (int64_t top = 1; rows > top && b < kBuckets - 1; top *= 2) ++b;
  return b;
}

std::string BatchStats::bucket_name(int b) {
  if (b == 0) return "1";
  if (b == 1) return "2";
  const int64_t lo = (int64_t(1) << (b - 1)) + 1, hi = int64_t(1) << b;
  if (b == kBuckets - 1) return fmt::format("{}+", lo);
  return fmt::format("{}-{}", lo, hi);
}

nlohmann::json BatchStats::to_json() const {
  nlohmann::json hist = nlohmann::json::object();
  for (int b = 0; b < kBuckets; ++b)
    if (this->hist[b]) hist[bucket_name(b)] = this->hist[b];
  const double nb = batches ? double(batches) : 1.0, nr = requests ? double(requests) : 1.0;
  return {{"batches", batches},
          {"rows", rows},
          {"requests", requests},
          {"rows_mean", batches ? double(rows) / nb : 0.0},
          {"rows_max", rows_max},
          {"batch_rows_hist", hist},
          {"started_full", full},
          {"started_capped", capped},
          {"started_timeout", timeout},
          {"forward_ms_mean", 1e3 * forward_s / nb},
          {"forward_ms_max", 1e3 * forward_max_s},
          {"forward_s", forward_s},
          {"latency_ms_mean", 1e3 * latency_s / nr},
          {"latency_ms_max", 1e3 * latency_max_s},
          {"waiting_requests_mean", waiting_sum / nb}};
}

Batcher::Batcher(Engine& engine, int actors, int envs_per_actor, int groups, int64_t max_batch_rows,
                 double max_wait_s)
    : engine_(engine), A_(actors), E_(envs_per_actor), G_(groups), S_(engine.state_size()),
      max_rows_(max_batch_rows > 0 ? std::min(max_batch_rows, engine.max_rows()) : engine.max_rows()),
      max_wait_s_(max_wait_s) {
  pending_.assign(size_t(A_) * size_t(G_), 0);
  table_.assign(size_t(A_) * size_t(E_) * size_t(std::max<int64_t>(S_, 1)), 0.0f);
}

void Batcher::add(const Request& r) {
  MPIRL_CHECK(r.actor >= 0 && r.actor < A_ && r.group >= 0 && r.group < G_, "request of actor {} group {}", r.actor,
              r.group);
  char& p = pending_[size_t(r.actor) * size_t(G_) + size_t(r.group)];
  if (p)
    throw Error(fmt::format("inference: a second request for env group {} arrived before the first was answered "
                            "(served actor {}): actors keep one request per group in flight",
                            r.group, r.actor));
  MPIRL_CHECK(r.first >= 0 && r.first + r.n <= E_ && r.n <= engine_.max_rows(), "request rows [{}, {}) of {} envs",
              r.first, r.first + r.n, E_);
  p = 1;
  queue_.push_back(r);
  rows_ += r.n;
}

bool Batcher::due(double now) const {
  if (queue_.empty()) return false;
  return queue_.size() == pending_.size() || rows_ >= max_rows_ || now - queue_.front().arrived >= max_wait_s_;
}

const std::vector<Batcher::Served>& Batcher::run_batch(double now) {
  served_.clear();
  if (queue_.empty()) return served_;
  const char why = queue_.size() == pending_.size() ? 'f' : rows_ >= max_rows_ ? 'c' : 't';
  const size_t waiting = queue_.size();
  int64_t n = 0;
  const int64_t OB = engine_.spec().obs_bytes();
  while (!queue_.empty() && (served_.empty() || n + queue_.front().n <= max_rows_)) {
    const Request r = queue_.front();
    queue_.pop_front();
    rows_ -= r.n;
    pending_[size_t(r.actor) * size_t(G_) + size_t(r.group)] = 0;
    std::memcpy(engine_.obs() + n * OB, r.obs, size_t(r.n * OB));
    std::memcpy(engine_.is_init() + n, r.is_init, size_t(r.n));
    if (S_ > 0)
      std::memcpy(engine_.state() + n * S_, state_of(r.actor, r.first), size_t(r.n * S_) * sizeof(float));
    served_.push_back({r, n});
    n += r.n;
  }
  const double t0 = now_seconds();
  engine_.run(n);
  const double dt = now_seconds() - t0;
  if (S_ > 0)
    for (const auto& s : served_)
      std::memcpy(table_.data() + (int64_t(s.req.actor) * E_ + s.req.first) * S_, engine_.state() + s.row * S_,
                  size_t(s.req.n * S_) * sizeof(float));
  for (BatchStats* st : {&total_, &window_}) {
    ++st->batches;
    st->rows += n;
    st->rows_max = std::max(st->rows_max, n);
    ++st->hist[BatchStats::bucket(n)];
    st->requests += int64_t(served_.size());
    st->full += why == 'f';
    st->capped += why == 'c';
    st->timeout += why == 't';
    st->forward_s += dt;
    st->forward_max_s = std::max(st->forward_max_s, dt);
    st->waiting_sum += double(waiting);
  }
  (void)now;
  return served_;
}

void Batcher::replied(double now) {
  for (const auto& s : served_) {
    const double l = now - s.req.arrived;
    for (BatchStats* st : {&total_, &window_}) {
      st->latency_s += l;
      st->latency_max_s = std::max(st->latency_max_s, l);
    }
  }
}

std::vector<Request> Batcher::drain() {
  std::vector<Request> out(queue_.begin(), queue_.end());
  queue_.clear();
  rows_ = 0;
  std::fill(pending_.begin(), pending_.end(), 0);
  return out;
}

BatchStats Batcher::take_window() {
  BatchStats w = window_;
  window_ = BatchStats{};
  return w;
}

}  // namespace mpirl::inference
