#pragma once
// The one global replay: T-step sequence items in preallocated storage, a selector, a rate limiter
// and the bookkeeping every item carries (generation, insertion number, times sampled, priority).
// Not thread-safe: the replay rank's single loop owns it.
//
// Storage is a pool of chunks of `chunk_rows` items laid out like a rollout message of that many
// sequences (Reverb's chunks): the replay rank receives a rollout straight into a free chunk
// (reserve_chunk / commit_chunk), so ingest costs no copy; items are copied once, when sampled.
// Slot s is row s % chunk_rows of chunk s / chunk_rows; a chunk is reused once all its rows are
// gone. insert() copies one sequence into the chunk being filled (chunk_rows = 1: item by item);
// that chunk too is freed as soon as its last item is gone, whether or not it was ever full.
// A restore (begin_restore, then insert_restored n times) fills whole chunks except the oldest,
// so a restored buffer looks like one whose oldest chunk is part-consumed: in queue mode that is
// what the capacity rule of validate_replay_config assumes (a part-filled chunk in the middle
// could leave fewer than a batch stored with no chunk free, and both sides would wait forever).
//
// Removal: an item is removed after max_times_sampled samples (0 = never), and when an insert
// finds the buffer full the oldest item is evicted (except in queue mode, where inserts wait).
// A slot's generation grows every time the slot is reused, so a priority update names
// (slot, generation) and is dropped, and counted, when the item it was computed for is gone.
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "buffer/rate_limiter.h"
#include "buffer/selectors.h"
#include "comm/seq_layout.h"

namespace mpirl::buffer {

struct ReplayOptions {
  int64_t capacity = 256;
  std::string selector = "fifo";
  int64_t max_times_sampled = 1;
  int64_t min_size_to_sample = 1;
  double samples_per_insert = 0, error_buffer = 0;
  double priority_exponent = 0.6;      // alpha
  double importance_exponent = 0.4;    // beta at the start
  int64_t importance_anneal_items = 0;  // beta reaches 1 after this many sampled items (0 = stays)
  uint64_t seed = 1;
  int64_t chunk_rows = 1;   // items per chunk (the replay rank uses env.num_envs); capacity rounds up
  size_t chunk_bytes = 0;   // bytes per chunk (a whole received frame); 0 = the payload of chunk_rows items
  // Queue mode (IMPALA/APPO): fifo, each item sampled exactly once, inserts wait when full.
  bool queue() const { return selector == "fifo" && max_times_sampled == 1; }
};

struct ReplayCounters {
  int64_t inserted = 0, evicted = 0, consumed = 0, sampled = 0, batches = 0;
  int64_t priority_updates = 0, stale_priority_updates = 0;
  int64_t removed() const { return evicted + consumed; }
};

// Per-item bookkeeping, also what a dump stores.
struct ItemMeta {
  int64_t generation = 0, insert_seq = -1, times_sampled = 0;
  double priority = 0;
  bool used = false;
};

class ReplayBuffer {
 public:
  ReplayBuffer(const SeqLayout& layout, const ReplayOptions& o);
  const SeqLayout& layout() const { return layout_; }
  const ReplayOptions& options() const { return o_; }
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }  // o.capacity rounded up to whole chunks
  int64_t chunk_rows() const { return R_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  const ReplayCounters& counters() const { return c_; }
  const RateLimiter& limiter() const { return limiter_; }
  double max_priority() const { return max_priority_; }

  bool can_insert(int64_t n) const;
  // Zero-copy ingest: a chunk to receive a frame into (evicting the oldest chunk when none is free
  // and the buffer is not a queue); then commit_chunk with the payload's offset in it, or
  // release_chunk when the frame was not a rollout. One reservation at a time.
  bool can_insert_chunk() const;
  char* reserve_chunk();
  void commit_chunk(size_t payload_offset, int64_t rows);
  void release_chunk();
  // The rate limiter admits a batch of n and, when sampled items are removed (max_times_sampled
  // > 0), at least n items are stored: each draw removes at most one, so a batch never runs the
  // selector dry.
  bool can_sample(int64_t n) const;
  // Stores sequence i of a payload of n sequences; priority < 0 means the current max. Returns the slot.
  int64_t insert(const char* payload, int64_t n, int64_t i, double priority = -1);
  // Before restoring n items into an empty buffer: leaves the first rows of the first chunk
  // empty (chunk_rows - n % chunk_rows of them, none when n is a multiple), so the n items end on
  // a chunk boundary and only the oldest chunk is part-filled. insert_restored works without it.
  void begin_restore(int64_t n);
  // Stores an item with given bookkeeping (restore); keeps insertion numbers.
  int64_t insert_restored(const char* payload, int64_t n, int64_t i, const ItemMeta& meta);

  // What a checkpoint keeps of the buffer besides its items (buffer/replay_checkpoint.h).
  struct ResumeState {
    ReplayCounters counters;
    int64_t next_seq = 0, limiter_inserts = 0, limiter_samples = 0;
    double max_priority = 1;
    std::string rng;  // the sampler's engine state (as operator<< writes it)
  };
  ResumeState resume_state() const;
  // After the items of a checkpoint are restored: counters, insertion numbers, limiter and RNG as
  // they were when it was taken.
  void resume(const ResumeState& s);

  struct Sampled {
    std::vector<int64_t> slots, generations;
    std::vector<float> weights;  // importance weights, max-normalised within the batch (1 if not prioritized)
    std::vector<double> probs;   // each draw's probability (of the item it drew, at the draw)
  };
  // The sampling mass: prioritized, the sum of priority^alpha over the stored items; otherwise
  // the item count (each item weighs 1). What a replay shard reports (comm/shard_sampling.h).
  double mass() const;
  // Draws B items (independently, with replacement except in queue mode) into dst, a payload for B sequences.
  Sampled sample(int64_t B, char* dst);
  // Applies priorities computed for (slot, generation); stale ones are dropped and counted.
  void update_priorities(const int64_t* slots, const int64_t* gens, const float* prios, int64_t n);

  // Items in insertion order, and direct access for dumps and tests.
  std::vector<int64_t> slots_in_order() const;
  const ItemMeta& meta(int64_t slot) const { return meta_[size_t(slot)]; }
  // Field f of the item in `slot`.
  const char* item_field(int64_t slot, size_t f) const;
  double importance_exponent() const;
  int64_t next_insert_seq() const { return next_seq_; }

 private:
  int64_t take_chunk();                 // a free chunk, evicting the oldest one if needed
  void start_filling(int64_t first_row);  // takes a chunk for insert() to fill from first_row
  void place(int64_t slot, const ItemMeta& in);  // bookkeeping of a newly stored item
  void remove(int64_t slot, bool evicted);
  int64_t oldest() const;
  char* chunk(int64_t c) { return storage_.data() + size_t(c) * chunk_bytes_; }
  const char* chunk(int64_t c) const { return storage_.data() + size_t(c) * chunk_bytes_; }

  const SeqLayout& layout_;
  ReplayOptions o_;
  int64_t R_, n_chunks_, capacity_;  // before selector_/limiter_: they are sized from capacity_
  std::unique_ptr<Selector> selector_;
  RateLimiter limiter_;
  size_t chunk_bytes_;
  std::vector<char> storage_;
  std::vector<size_t> field_off_;       // each field's offset in a chunk's payload
  std::vector<size_t> payload_off_;     // per chunk: where its payload starts
  std::vector<int64_t> live_rows_;      // per chunk: items still stored
  std::vector<int64_t> free_chunks_;
  // The chunk insert() copies into (-1: none). Once it holds an item it is freed like any other
  // chunk when its last item goes, which also ends the filling.
  int64_t filling_ = -1, next_row_ = 0;
  int64_t reserved_ = -1;
  std::vector<ItemMeta> meta_;
  // (insert_seq, slot) oldest first; entries of removed items are skipped lazily and compacted.
  mutable std::deque<std::pair<int64_t, int64_t>> order_;
  bool live(const std::pair<int64_t, int64_t>& e) const {
    const auto& m = meta_[size_t(e.second)];
    return m.used && m.insert_seq == e.first;
  }
  void prune() const;
  int64_t size_ = 0, next_seq_ = 0;
  double max_priority_ = 1.0;
  std::mt19937_64 rng_;
  ReplayCounters c_;
};

}  // namespace mpirl::buffer
