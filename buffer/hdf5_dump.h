#pragma once
// Replay dumps in HDF5 (schema version 1), read with h5py or h5dump:
//
//   /                      attributes: schema_version, complete (written last), env_id,
//                          rollout_len, state_size, obs_shape, capacity, items, checksum_crc32,
//                          selector, config (the run's resolved TOML), created_unix, and the
//                          replay counters (inserted, evicted, consumed, sampled, batches,
//                          priority_updates, stale_priority_updates, max_priority, next_insert_seq)
//   /items/<field>         one dataset per sequence field, [items, per-sequence shape...], in
//                          insertion order, chunked along items: obs, is_init, action, reward,
//                          terminated, truncated, logp, dist, trunc_value, version, actor,
//                          env_index, state0 (recurrent cores only) -- see runtime/rollout.h
//   /items/priority        float64 [items]
//   /items/times_sampled   int64 [items]
//   /items/insert_seq      int64 [items]   insertion sequence number
//
// checksum_crc32 is zlib's CRC-32 over the raw little-endian bytes of every /items dataset, in
// the order listed above. A dump is written to PATH.tmp.<pid>, flushed and fsync'ed, renamed to
// PATH (atomic), and then PATH.complete (JSON: items, checksum) is written; a file whose
// `complete` attribute is missing or whose checksum does not match is never restored.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "buffer/replay_buffer.h"

namespace mpirl::buffer {

inline constexpr int kDumpSchemaVersion = 1;

struct DumpHeader {
  int64_t schema_version = 0, rollout_len = 0, state_size = 0, capacity = 0, items = 0;
  uint32_t checksum = 0;
  bool complete = false;
  std::string env_id, selector, config;
  std::vector<int64_t> obs_shape;
  std::map<std::string, double> counters;
};

struct DumpInfo {
  std::string path;
  int64_t items = 0;
  uint32_t checksum = 0;
  double seconds = 0;
  int64_t bytes = 0;
};

// Writes the buffer atomically to `path`. `config` and `env_id` go into the attributes.
DumpInfo dump_replay(const ReplayBuffer& rb, const std::string& path, const std::string& env_id,
                     const std::string& config);

// Reads the attributes; throws Error naming the file when it is missing, not HDF5 or incomplete.
DumpHeader read_dump_header(const std::string& path);

// Throws Error naming the file and the mismatch when the dump cannot go into a buffer of `layout`
// for `env_id` with `capacity` slots.
void check_dump_compatible(const DumpHeader& h, const std::string& path, const SeqLayout& layout,
                           const std::string& env_id, int64_t capacity);

// Reads every item (verifying the checksum) into `rb`, which must be empty. Returns the header.
DumpHeader restore_replay(ReplayBuffer& rb, const std::string& path, const std::string& env_id);

// One dataset read back whole (for inspect): raw bytes with its dtype and shape.
struct DumpArray {
  std::string name;
  wire::DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;
};
std::vector<DumpArray> read_dump_items(const std::string& path, uint32_t* checksum_out);

uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

}  // namespace mpirl::buffer
