#pragma once
// Replay dumps in HDF5 (schema version 2, kDumpSchemaVersion), read with h5py or h5dump:
//
//   /                      attributes: schema_version, complete (written last), env_id,
//                          rollout_len, state_size, obs_shape, obs_dtype, capacity, items, checksum_crc32,
//                          selector, config (the run's resolved TOML), created_unix, fields (the
//                          /items datasets, comma-separated, in checksum order), and the replay
//                          counters (inserted, evicted, consumed, sampled, batches,
//                          priority_updates, stale_priority_updates, max_priority, next_insert_seq)
//   /items/<field>         one dataset per sequence field, [items, per-sequence shape...], in
//                          insertion order, chunked along items, in wire order (comm/seq_layout.h):
//                            obs         float32 [n, T+1, obs...]  (uint8 for image envs:
//                                        obs_dtype; gzip level 1 where an item is >= 1 KiB)
//                            is_init     uint8   [n, T+1]
//                            action      int64 [n, T] | float32 [n, T, A]
//                            reward      float32 [n, T]
//                            terminated  uint8   [n, T]
//                            truncated   uint8   [n, T]
//                            logp        float32 [n, T]
//                            dist        float32 [n, T, L]
//                            boot_obs    (as obs) [n, K, obs...] } only when K = boot_slots > 0
//                            boot_state  float32 [n, K, S]       }   (boot_state only when S > 0)
//                            boot_step   int32   [n, K]          }
//                            version int64 [n], actor int32 [n], env_index int32 [n]
//                            state0      float32 [n, S]          (recurrent cores only, S > 0)
//                            initial_priority float32 [n]        (r2d2.initial_priority = "actor" only)
//   /items/priority        float64 [items]
//   /items/times_sampled   int64 [items]
//   /items/insert_seq      int64 [items]   insertion sequence number
//
// checksum_crc32 is zlib's CRC-32 over the raw little-endian bytes of every /items dataset, in
// the order listed above (the `fields` attribute), each dataset's items in order. Datasets are
// written and read in bounded blocks of items (DumpOptions::io_bytes), so neither a dump nor a
// restore holds more than one block besides the buffer itself. A dump is written to
// PATH.tmp.<pid>, flushed, closed (every close checked) and fsync'ed, renamed to PATH (atomic),
// the directory fsync'ed, and then PATH.complete (JSON: items, checksum, bytes) is written
// atomically and durably; an old PATH.complete is removed before the rename, and after a
// successful dump the PATH.tmp.<digits> left by killed dumps are removed. On any failure the
// temporary is removed and PATH is untouched. A file whose `complete` attribute is missing or
// whose checksum does not match is never restored, and a restore verifies the checksum over the
// whole file before it inserts anything.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "buffer/replay_buffer.h"

namespace mpirl::buffer {

inline constexpr int kDumpSchemaVersion = 2;  // 2: boot_obs/boot_state/boot_step replace trunc_value

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

struct DumpOptions {
  // Bytes of items per hyperslab write or read (at least one item): the memory a dump or a
  // restore needs besides the buffer.
  size_t io_bytes = size_t(4) << 20;
  // Test seam: called with the temporary's path once every dataset and attribute is written,
  // before anything is closed; an exception thrown here fails the dump like an I/O error.
  std::function<void(const std::string& tmp_path)> on_data_written;
  // Called after each block of items is written or read: progress, for a caller that watches a
  // dump or restore running on another thread (buffer/io_job.h).
  std::function<void()> on_block;
  // Called with true before the final flush, close and fsync (no blocks: they can take long on a
  // network file system), and with false once they are done.
  std::function<void(bool)> on_flush;
};

// What a dump writes, taken from a buffer at one instant: the bookkeeping is copied, the items
// are read in place. A dump of a snapshot may run on another thread while the buffer's owner
// samples from it and updates priorities (neither writes an item's storage), but the owner must
// not insert until the dump is done: an insert may overwrite the storage of an item it writes.
struct DumpSnapshot {
  const ReplayBuffer* rb = nullptr;  // layout, capacity, selector and the items' storage
  std::vector<int64_t> slots;        // in insertion order
  std::vector<ItemMeta> meta;        // per entry of `slots`
  ReplayCounters counters;
  int64_t next_seq = 0;
  double max_priority = 1;
  static DumpSnapshot of(const ReplayBuffer& rb);
};

// Writes the buffer atomically to `path`. `config` and `env_id` go into the attributes. Throws
// mpirl::Error naming the file on any failure (the temporary is removed, PATH left as it was).
DumpInfo dump_replay(const ReplayBuffer& rb, const std::string& path, const std::string& env_id,
                     const std::string& config, const DumpOptions& opts = {});
DumpInfo dump_replay(const DumpSnapshot& snap, const std::string& path, const std::string& env_id,
                     const std::string& config, const DumpOptions& opts = {});

// Publishes a complete dump `src` (described by `src_info`) under `path` as well, by a hard link
// (no copy), with the same protocol: PATH.tmp.<pid>, fsync'ed, renamed, PATH.complete. Throws Error
// (e.g. across file systems) leaving PATH as it was: the caller then dumps in full.
DumpInfo link_dump(const std::string& src, const DumpInfo& src_info, const std::string& path);

// Reads the attributes; throws Error naming the file when it is missing, not HDF5 or incomplete.
DumpHeader read_dump_header(const std::string& path);

// Throws Error naming the file and the mismatch when the dump cannot go into a buffer of `layout`
// for `env_id` with `capacity` slots.
void check_dump_compatible(const DumpHeader& h, const std::string& path, const SeqLayout& layout,
                           const std::string& env_id, int64_t capacity);

// Reads every item into `rb`, which must be empty, in two streaming passes over bounded blocks:
// the first checks the datasets and verifies the checksum (nothing is inserted when it fails),
// the second inserts. Returns the header.
DumpHeader restore_replay(ReplayBuffer& rb, const std::string& path, const std::string& env_id,
                          const DumpOptions& opts = {});

// One dataset read back whole (for inspect, never for restore): raw bytes with its dtype and shape.
struct DumpArray {
  std::string name;
  wire::DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> data;
};
std::vector<DumpArray> read_dump_items(const std::string& path, uint32_t* checksum_out);

uint32_t crc32_update(uint32_t crc, const void* data, size_t n);

}  // namespace mpirl::buffer
