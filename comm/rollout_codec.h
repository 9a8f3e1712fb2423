#pragma once
// Compressed rollouts (issue 31): a Rollout message whose uint8 image fields (obs, and boot_obs
// when the layout has boot slots) travel as one comm/obs_codec.h encoding per sequence. Every other
// field, and the episode statistics, travel as in the plain message (comm/seq_layout.h), in the
// same order, each image field F replaced by two arrays:
//   F_z          uint8 [Z]   the n encodings, back to back
//   F_z_bytes    int64 [n]   the length of each
// then episode_return, episode_length. (Unused boot slots are zero frames: a few bytes each.)
// The receiver decodes it into the plain payload of n sequences (SeqLayout::arrays(n, true, m)),
// where the replay's chunk expects it: the items stored are bit-for-bit the actor's.
#include <cstdint>
#include <string>
#include <vector>

#include "comm/obs_codec.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"

namespace mpirl {

// Whether observations of this spec can travel compressed (uint8 images [C, H, W]).
bool obs_compressible(const envs::EnvSpec& spec);

// Writes the frame of a compressed rollout into `frame` (resized; the envelope's kind, sender,
// seq and version as given, its arrays replaced): n sequences and m episode statistics read from
// `raw`, a plain payload (SeqLayout::arrays(n, true, m)). Returns the frame's length; `obs_bytes`,
// when given, gets the encodings' total (every image field).
size_t encode_rollout(ObsCodec& codec, const SeqLayout& layout, const char* raw, int64_t n, int64_t m,
                      wire::Envelope env, std::vector<char>& frame, size_t* obs_bytes = nullptr);

// Whether a decoded Rollout message is a compressed one (its first array is obs_z).
bool is_compressed_rollout(const wire::Message& msg);

// Checks a compressed rollout from `sender` against the layout (every array's name, type and
// shape; each encoding's length and contents) and decodes its n sequences into `dst`, a payload
// of SeqLayout::arrays(n) (the statistics are not copied: read them from msg); n must be
// `expect_n` (the room in dst). Returns n. Throws mpirl::Error naming the sender and what was
// wrong; `dst` may then be partly written.
int64_t decode_rollout(ObsCodec& codec, const SeqLayout& layout, const wire::Message& msg, int sender, char* dst,
                       int64_t expect_n);

}  // namespace mpirl
