#pragma once
// One HDF5 view over the dumps of K replay shards (roles.replays = K; each shard dumps its own file
// in the format of buffer/hdf5_dump.h): a small file whose datasets are HDF5 virtual datasets
// (H5Pset_virtual) that concatenate the same dataset of every shard along axis 0, so that
// h5py.File(vds)["items/obs"] reads all shards' items as one [sum n_k, ...] dataset. No item is
// copied: the view reads the shard files, which must stay beside it.
//
//   /                 attributes: the first shard's schema ones (schema_version, env_id,
//                     rollout_len, state_size, obs_shape, obs_dtype, selector, config, fields);
//                     items = the total; capacity and the replay counters summed over the shards
//                     (max_priority: their largest); shards (K); shard_files (strings, as stored
//                     in the mappings); shard_items and shard_checksums (each shard's
//                     checksum_crc32); created_unix; complete = 1.
//   /<group>/<name>   for every dataset of every group of the first shard (/items in schema 2):
//                     virtual, [sum of the shards' first dimensions, trailing shape...], the
//                     shards in the order given; an empty dataset when that sum is 0.
//
// There is no checksum_crc32 (the dumps' CRC runs over each dataset of one file in turn; the
// view's would need every byte read) and no PATH.complete marker: the view is not a dump, and
// read_dump_header / restore_replay refuse it; restore the shards one by one.
//
// Source file names: a shard in the view's directory (or below it) is stored relative to it, so
// a run directory moved or copied whole still opens; any other shard by its absolute path. HDF5
// (1.10.2 and later) looks a relative name up in $HDF5_VDS_PREFIX, then H5Pset_virtual_prefix,
// then the directory of the VDS file as it was opened, then the working directory; an absolute
// name that does not exist is retried by its last component the same way. A source that cannot
// be found reads as the fill value (0), without an error: keep the shards with the view.
#include <string>
#include <vector>

namespace mpirl::buffer {

// Writes `out_path` atomically (PATH.tmp.<pid>, flushed, closed, fsync'ed, renamed, directory
// fsync'ed). Every shard must be a complete dump of this schema, of the first shard's env and
// layout, holding the same datasets with the same dtype and trailing shape. Throws mpirl::Error
// naming the file when a shard is missing, unreadable, incomplete or disagrees with the first,
// or when `out_path` is one of the shards; out_path is then left as it was.
void write_replay_vds(const std::string& out_path, const std::vector<std::string>& shard_paths);

}  // namespace mpirl::buffer
