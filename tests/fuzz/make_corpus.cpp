// Writes the seed corpus of the fuzz targets from real messages and files: every kind of frame the
// roles send (built as they build them), the shipped configs, a COMPLETE marker and a TFRecord file.
// Run by tests/hardening/run.sh when tests/fuzz/corpus/<target> is empty; the corpus is kept in the
// repo (minimised by bench/fuzz.sh).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/inference_wire.h"
#include "comm/obs_codec.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "tests/fuzz/fuzz_specs.h"
#include "tracking/record_io.h"

using namespace mpirl;

namespace {
void put(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}
std::string frame(wire::Envelope env) {
  std::vector<char> payload(wire::payload_bytes(env.arrays), 0);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = char(i * 7);
  const auto f = wire::build_frame(env, payload.data(), payload.size());
  return std::string(f.begin(), f.end());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string out = argv[1];
  const envs::EnvSpec cp = fuzz::cartpole();
  const SeqLayout plain(cp, 8), recurrent(cp, 8, 6);
  std::system(("mkdir -p " + out + "/envelope " + out + "/tfrecord " + out + "/checkpoint " + out + "/dump").c_str());
  wire::Envelope e;
  e.sender = 3;
  e.kind = wire::Kind::Rollout;
  e.arrays = plain.arrays(4, true, 2);
  put(out + "/envelope", "rollout", frame(e));
  e.arrays = recurrent.arrays(2, true, 1);
  put(out + "/envelope", "rollout_recurrent", frame(e));
  e.kind = wire::Kind::SampleReply;
  e.arrays = sample_reply_arrays(plain, 4, 3);
  e.has_status = true;
  e.status.sampled_by_learner = {4, 5};
  e.status.dump.path = "runs/x/replay.h5";
  e.status.shard = 1;
  e.status.priority_mass = 12.5;
  e.status.importance_exponent = 0.4;
  put(out + "/envelope", "sample_reply", frame(e));
  e.has_status = false;
  e.kind = wire::Kind::PriorityUpdate;
  e.arrays = {{"slot", wire::DType::I64, {4}}, {"generation", wire::DType::I64, {4}}, {"priority", wire::DType::F32, {4}}};
  put(out + "/envelope", "priority_update", frame(e));
  e.kind = wire::Kind::SampleRequest;  // a learner of replay shards: its share of the batch
  e.arrays = {{"n", wire::DType::I64, {1}}};
  put(out + "/envelope", "sample_request_shard", frame(e));
  e.kind = wire::Kind::CheckpointRequest;
  e.sender = 0;
  e.arrays = {{"dir", wire::DType::U8, {12}}, {"final", wire::DType::U8, {1}}};
  put(out + "/envelope", "checkpoint_request", frame(e));
  e.kind = wire::Kind::ActorDone;
  e.sender = 3;
  e.arrays = {{"env_steps", wire::DType::I64, {1}}};
  put(out + "/envelope", "actor_done", frame(e));
  e.kind = wire::Kind::InferRequest;
  e.arrays = infer_request_arrays(cp, 4);
  put(out + "/envelope", "infer_request", frame(e));
  e.kind = wire::Kind::InferReply;
  e.arrays = infer_reply_arrays(cp, 4, 6);
  put(out + "/envelope", "infer_reply", frame(e));
  e.kind = wire::Kind::Params;
  e.arrays = {{"params", wire::DType::F32, {10}}};
  put(out + "/envelope", "params", frame(e));
  e.kind = wire::Kind::Stop;
  e.arrays = {};
  put(out + "/envelope", "stop", frame(e));
  std::string rec = tracking::frame_record("first record") + tracking::frame_record(std::string(40, 'x'));
  put(out + "/tfrecord", "events", rec);
  nlohmann::json c = {{"format", 1}, {"version", 7}, {"env_steps", 100}, {"files", nlohmann::json::object()}};
  for (const char* f : {"config.toml", "learner.pt", "state.json", "replay.h5", "replay_state.json"})
    c["files"][f] = {{"bytes", std::strlen(f)}, {"crc32", 0}};
  put(out + "/checkpoint", "complete", c.dump());
  // fuzz_dump's programs of edits to its real dump: none (the dump restores), items raised to
  // 2^40, the obs dataset replaced by one claiming 2^40 rows of float64, the config attribute cut.
  put(out + "/dump", "no_edits", "");
  put(out + "/dump", "items_2e40", std::string("\x00\x04", 2) + std::string("\x00\x00\x00\x00\x00\x01\x00\x00", 8) + "\x00");
  put(out + "/dump", "obs_2e40_rows", std::string("\x04\x00\x01\x00", 4) + std::string("\x00\x00\x00\x00\x00\x01\x00\x00", 8) + "\x00");
  put(out + "/dump", "config_cut", std::string("\x01\x03\x05[run]", 8));
  // fuzz_obs: encodings of a frame-stacked sequence of its shape (a reset at frame 3), under each
  // option, and of random frames.
  std::system(("mkdir -p " + out + "/obs").c_str());
  std::vector<uint8_t> frames(size_t(fuzz::kObsFrames * fuzz::kObsPlanes * fuzz::kObsPlaneBytes));
  for (int64_t t = 0; t < fuzz::kObsFrames; ++t)
    for (int64_t c = 0; c < fuzz::kObsPlanes; ++c)
      for (int64_t i = 0; i < fuzz::kObsPlaneBytes; ++i) {
        const int64_t plane = t < 3 ? t + c : 100 + (t > 3 ? t - 3 : 0) + c;  // frame 3: a reset
        frames[size_t((t * fuzz::kObsPlanes + c) * fuzz::kObsPlaneBytes + i)] = uint8_t(i == plane % 16 ? 200 : plane);
      }
  for (bool dedup : {false, true})
    for (bool delta : {false, true}) {
      ObsCodec codec({1, dedup, delta});
      std::vector<char> enc;
      codec.encode(frames.data(), fuzz::kObsFrames, fuzz::kObsPlanes, fuzz::kObsPlaneBytes, enc);
      put(out + "/obs", std::string("stack") + (dedup ? "_dedup" : "") + (delta ? "_delta" : ""),
          std::string(enc.begin(), enc.end()));
    }
  for (size_t i = 0; i < frames.size(); ++i) frames[i] = uint8_t(i * 131 + (i >> 3));
  ObsCodec codec;
  std::vector<char> enc;
  codec.encode(frames.data(), fuzz::kObsFrames, fuzz::kObsPlanes, fuzz::kObsPlaneBytes, enc);
  put(out + "/obs", "noise", std::string(enc.begin(), enc.end()));
  return 0;
}
