#include "buffer/replay_buffer.h"

#include <sstream>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace mpirl::buffer {
namespace {

RateLimiterOptions limiter_options(const ReplayOptions& o) {
  RateLimiterOptions r;
  r.min_size_to_sample = o.min_size_to_sample;
  r.samples_per_insert = o.samples_per_insert;
  r.error_buffer = o.error_buffer;
  r.queue = o.queue();
  r.capacity = o.capacity;
  return r;
}
}  // namespace

ReplayBuffer::ReplayBuffer(const SeqLayout& layout, const ReplayOptions& o)
    : layout_(layout), o_(o), R_(std::max<int64_t>(1, o.chunk_rows)),
      n_chunks_((o.capacity + R_ - 1) / R_), capacity_(n_chunks_ * R_),
      selector_(make_selector(o.selector, capacity_, o.priority_exponent)), limiter_([&] {
        auto r = limiter_options(o);
        r.capacity = capacity_;
        return r;
      }()),
      meta_(size_t(capacity_)), rng_(o.seed) {
  MPIRL_CHECK(o.capacity > 0, "replay capacity {}", o.capacity);
  const size_t payload = layout_.field_offset(layout_.fields().size(), R_);
  chunk_bytes_ = std::max(o.chunk_bytes, payload);
  chunk_bytes_ = (chunk_bytes_ + 4095) / 4096 * 4096;  // page-aligned chunks
  storage_.resize(chunk_bytes_ * size_t(n_chunks_));
  for (size_t f = 0; f < layout_.fields().size(); ++f) field_off_.push_back(layout_.field_offset(f, R_));
  payload_off_.assign(size_t(n_chunks_), 0);
  live_rows_.assign(size_t(n_chunks_), 0);
  for (int64_t c = n_chunks_ - 1; c >= 0; --c) free_chunks_.push_back(c);
}

void ReplayBuffer::prune() const {
  while (!order_.empty() && !live(order_.front())) order_.pop_front();
  if (order_.size() > 2 * size_t(capacity_) + 64) {  // stale entries in the middle: compact
    std::deque<std::pair<int64_t, int64_t>> keep;
    for (auto& e : order_)
      if (live(e)) keep.push_back(e);
    order_.swap(keep);
  }
}

int64_t ReplayBuffer::oldest() const {
  prune();
  return order_.front().second;
}

const char* ReplayBuffer::item_field(int64_t slot, size_t f) const {
  const int64_t c = slot / R_, r = slot % R_;
  return chunk(c) + payload_off_[size_t(c)] + field_off_[f] + size_t(r) * layout_.fields()[f].bytes;
}

bool ReplayBuffer::can_insert(int64_t n) const {
  if (!limiter_.can_insert(n, size_)) return false;
  if (!o_.queue()) return true;
  int64_t room = int64_t(free_chunks_.size()) * R_ + (filling_ >= 0 ? R_ - next_row_ : 0);
  return room >= n;
}

bool ReplayBuffer::can_insert_chunk() const {
  return limiter_.can_insert(R_, size_) && (!o_.queue() || !free_chunks_.empty());
}

bool ReplayBuffer::can_sample(int64_t n) const {
  if (!limiter_.can_sample(n, size_)) return false;
  return o_.max_times_sampled <= 0 || size_ >= n;
}

int64_t ReplayBuffer::take_chunk() {
  while (free_chunks_.empty()) {
    MPIRL_CHECK(!o_.queue(), "replay: insert into a full queue (the rate limiter should have waited)");
    // With no chunk free every chunk holds an item: remove() frees a chunk with its last item,
    // and no chunk is taken while one is reserved or a new filling chunk is still empty. So there
    // is an oldest item (an empty order_ here would be a bug, not something to read).
    MPIRL_CHECK(size_ > 0, "replay: no free chunk and no stored item ({} chunks, filling {}, reserved {})",
                n_chunks_, filling_, reserved_);
    // Evict every remaining item of the chunk holding the oldest item; the last removal frees it.
    const int64_t c = oldest() / R_;
    for (int64_t r = 0; r < R_; ++r)
      if (meta_[size_t(c * R_ + r)].used) remove(c * R_ + r, /*evicted=*/true);
  }
  int64_t c = free_chunks_.back();
  free_chunks_.pop_back();
  return c;
}

void ReplayBuffer::remove(int64_t slot, bool evicted) {
  auto& m = meta_[size_t(slot)];
  MPIRL_CHECK(m.used, "replay: removing empty slot {}", slot);
  selector_->remove(slot);
  m.used = false;
  --size_;
  const int64_t c = slot / R_;
  // A chunk is free again when its last item is gone. The chunk insert() fills is no exception:
  // it stops being filled (its unused rows are given up), or a restored buffer's last chunk, or
  // one only part-filled, would never come back.
  if (--live_rows_[size_t(c)] == 0 && c != reserved_) {
    if (c == filling_) filling_ = -1;
    free_chunks_.push_back(c);
  }
  if (evicted) ++c_.evicted;
  else ++c_.consumed;
  prune();
}

ReplayBuffer::ResumeState ReplayBuffer::resume_state() const {
  ResumeState r;
  r.counters = c_;
  r.next_seq = next_seq_;
  r.limiter_inserts = limiter_.inserts();
  r.limiter_samples = limiter_.samples();
  r.max_priority = max_priority_;
  std::ostringstream os;
  os << rng_;
  r.rng = os.str();
  return r;
}

void ReplayBuffer::resume(const ResumeState& r) {
  MPIRL_CHECK(r.next_seq >= next_seq_, "replay: resuming insertion number {} below the restored items' {}", r.next_seq,
              next_seq_);
  c_ = r.counters;
  next_seq_ = r.next_seq;
  limiter_.restore(r.limiter_inserts, r.limiter_samples);
  max_priority_ = std::max(max_priority_, r.max_priority);
  std::istringstream is(r.rng);
  is >> rng_;
  MPIRL_CHECK(!is.fail(), "replay: the checkpoint's sampler RNG state does not parse");
}

void ReplayBuffer::place(int64_t s, const ItemMeta& in) {
  auto& m = meta_[size_t(s)];
  const int64_t gen = m.generation + 1;
  m = in;
  m.generation = gen;
  m.used = true;
  next_seq_ = std::max(next_seq_, m.insert_seq + 1);
  max_priority_ = std::max(max_priority_, m.priority);
  MPIRL_CHECK(order_.empty() || order_.back().first < m.insert_seq, "replay: insertion numbers must increase");
  order_.emplace_back(m.insert_seq, s);
  selector_->insert(s, m.insert_seq, m.priority);
  ++live_rows_[size_t(s / R_)];
  ++size_;
  ++c_.inserted;
  limiter_.inserted(1);
}

int64_t ReplayBuffer::insert(const char* payload, int64_t n, int64_t i, double priority) {
  ItemMeta m;
  m.priority = priority < 0 ? max_priority_ : priority;
  m.insert_seq = next_seq_;
  return insert_restored(payload, n, i, m);
}

void ReplayBuffer::start_filling(int64_t first_row) {
  filling_ = -1;  // a full chunk being left behind holds items: remove() frees it later
  const int64_t c = take_chunk();
  filling_ = c;
  next_row_ = first_row;
  payload_off_[size_t(c)] = 0;
}

void ReplayBuffer::begin_restore(int64_t n) {
  MPIRL_CHECK(size_ == 0 && filling_ < 0 && reserved_ < 0, "replay: restore into a non-empty buffer");
  MPIRL_CHECK(n >= 0 && n <= capacity_, "replay: restoring {} items into {} slots", n, capacity_);
  if (n % R_ != 0) start_filling(R_ - n % R_);
}

int64_t ReplayBuffer::insert_restored(const char* payload, int64_t n, int64_t i, const ItemMeta& in) {
  MPIRL_CHECK(reserved_ < 0, "replay: insert while a chunk is reserved");
  if (filling_ < 0 || next_row_ == R_) start_filling(0);
  const int64_t s = filling_ * R_ + next_row_++;
  layout_.copy_sequence(payload, n, i, chunk(filling_), R_, s % R_);  // a chunk is a payload of R_ sequences
  place(s, in);
  return s;
}

char* ReplayBuffer::reserve_chunk() {
  MPIRL_CHECK(reserved_ < 0, "replay: a chunk is already reserved");
  reserved_ = take_chunk();
  return chunk(reserved_);
}

void ReplayBuffer::commit_chunk(size_t payload_offset, int64_t rows) {
  MPIRL_CHECK(reserved_ >= 0, "replay: commit without a reserved chunk");
  MPIRL_CHECK(rows == R_, "replay: a chunk holds {} items, got {}", R_, rows);
  MPIRL_CHECK(payload_offset % wire::kAlign == 0 &&
                  payload_offset + layout_.field_offset(layout_.fields().size(), R_) <= chunk_bytes_,
              "replay: payload at offset {} does not fit a {}-byte chunk", payload_offset, chunk_bytes_);
  const int64_t c = reserved_;
  reserved_ = -1;
  payload_off_[size_t(c)] = payload_offset;
  // The actor's priorities (comm/seq_layout.h: initial_priority), negative: the largest so far.
  const float* initial = layout_.has(Seq::InitialPriority)
                             ? layout_.ptr<float>(chunk(c) + payload_offset, Seq::InitialPriority, R_)
                             : nullptr;
  for (int64_t r = 0; r < R_; ++r) {
    ItemMeta m;
    m.priority = initial && initial[r] >= 0 ? double(initial[r]) : max_priority_;
    m.insert_seq = next_seq_;
    place(c * R_ + r, m);
  }
}

void ReplayBuffer::release_chunk() {
  MPIRL_CHECK(reserved_ >= 0, "replay: release without a reserved chunk");
  free_chunks_.push_back(reserved_);
  reserved_ = -1;
}

double ReplayBuffer::importance_exponent() const {
  if (o_.importance_anneal_items <= 0) return o_.importance_exponent;
  double f = std::min(1.0, double(c_.sampled) / double(o_.importance_anneal_items));
  return o_.importance_exponent + (1.0 - o_.importance_exponent) * f;
}

ReplayBuffer::Sampled ReplayBuffer::sample(int64_t B, char* dst) {
  MPIRL_CHECK(can_sample(B), "replay: sample of {} not allowed now (size {})", B, size_);
  Sampled out;
  out.slots.resize(size_t(B));
  out.generations.resize(size_t(B));
  out.weights.assign(size_t(B), 1.f);
  std::vector<double>& probs = out.probs;
  probs.assign(static_cast<size_t>(B), 1.0);
  const double beta = importance_exponent();
  const double n_items = double(size_);
  for (int64_t k = 0; k < B; ++k) {
    double p = 1;
    int64_t s = selector_->sample(rng_, &p);
    auto& m = meta_[size_t(s)];
    layout_.copy_sequence(chunk(s / R_) + payload_off_[size_t(s / R_)], R_, s % R_, dst, B, k);
    out.slots[size_t(k)] = s;
    out.generations[size_t(k)] = m.generation;
    probs[size_t(k)] = p;
    ++m.times_sampled;
    if (o_.max_times_sampled > 0 && m.times_sampled >= o_.max_times_sampled) remove(s, /*evicted=*/false);
  }
  if (o_.selector == "prioritized") {
    double wmax = 0;
    for (int64_t k = 0; k < B; ++k) wmax = std::max(wmax, std::pow(n_items * probs[size_t(k)], -beta));
    for (int64_t k = 0; k < B; ++k)
      out.weights[size_t(k)] = float(std::pow(n_items * probs[size_t(k)], -beta) / wmax);
  }
  c_.sampled += B;
  ++c_.batches;
  limiter_.sampled(B);
  return out;
}

double ReplayBuffer::mass() const {
  if (auto* p = dynamic_cast<const PrioritizedSelector*>(selector_.get())) return p->tree().total();
  return double(size_);
}

void ReplayBuffer::update_priorities(const int64_t* slots, const int64_t* gens, const float* prios, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = slots[k];
    if (s < 0 || s >= capacity_) throw Error(fmt::format("priority update names slot {} of a {}-slot replay", s, capacity_));
    if (!std::isfinite(prios[k]) || prios[k] < 0)
      throw Error(fmt::format("priority update for slot {} is {} (must be finite and >= 0)", s, prios[k]));
    auto& m = meta_[size_t(s)];
    if (!m.used || m.generation != gens[k]) {
      ++c_.stale_priority_updates;
      continue;
    }
    m.priority = prios[k];
    max_priority_ = std::max(max_priority_, m.priority);
    selector_->update(s, m.priority);
    ++c_.priority_updates;
  }
}

std::vector<int64_t> ReplayBuffer::slots_in_order() const {
  std::vector<int64_t> out;
  out.reserve(size_t(size_));
  for (auto& e : order_)
    if (live(e)) out.push_back(e.second);
  return out;
}

}  // namespace mpirl::buffer
