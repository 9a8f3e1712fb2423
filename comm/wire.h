#pragma once
// The wire format. Every MPI message is one frame:
//   [u32 envelope_bytes][u32 payload_offset][envelope ...][padding][payload]
// The envelope is a Boost.Serialization binary archive (magic, schema version, kind, sender,
// sequence number, policy version, array descriptors, the replay status where present), written
// field by field: every count and string length is bounded before anything is allocated. The payload is the arrays'
// raw bytes in descriptor order, each starting at a 64-byte aligned offset. Decoding checks the
// magic, version, kind, sender and that the byte count matches the declared shapes exactly; any
// mismatch throws mpirl::Error naming the sender.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/protocol.h"

namespace mpirl::wire {

inline constexpr uint32_t kMagic = 0x4C52504Du;  // "MPRL"
inline constexpr uint16_t kSchemaVersion = 6;  // 2: typed replay status, boot_* fields; 3: checkpoints; 4: inference;
                                               // 5: every length bounded before it is allocated;
                                               // 6: replay shards (mass in the status, request counts)
inline constexpr size_t kAlign = 64;
inline constexpr size_t kHeaderBytes = 8;
// Room reserved at the front of a preallocated frame for the header and envelope, so a payload
// written in place (actor rollouts, parameter broadcasts) starts at a fixed, aligned offset.
inline constexpr size_t kHeaderRegion = 4096;


enum class DType : uint8_t { F32 = 1, F64, I32, I64, U8 };
size_t dtype_size(DType d);
const char* dtype_name(DType d);

struct ArrayDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t elements() const;
  size_t bytes() const { return elements() * dtype_size(dtype); }
};

struct Envelope {
  uint32_t magic = kMagic;
  uint16_t schema = kSchemaVersion;
  Kind kind = Kind::Rollout;
  int32_t sender = -1;
  uint64_t seq = 0;
  int64_t policy_version = -1;
  std::vector<ArrayDesc> arrays;
  bool has_status = false;  // SampleReply and LearnerByeAck carry the replay's status
  ReplayStatus status;
};

inline size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
// Bytes of the payload for these arrays (each aligned), and each array's offset in it.
size_t payload_bytes(const std::vector<ArrayDesc>& arrays, std::vector<size_t>* offsets = nullptr);

std::string serialize(const Envelope& env);

// Writes header + envelope at the start of `frame` with the payload at `payload_offset`
// (throws if the envelope does not fit). Returns the frame's total size.
size_t write_header(char* frame, size_t payload_offset, const Envelope& env);
// Builds a whole frame (header + envelope + payload copied from `payload`).
std::vector<char> build_frame(const Envelope& env, const void* payload, size_t payload_len);
// The payload offset build_frame would use for this envelope.
size_t natural_payload_offset(const Envelope& env);

struct Message {
  Envelope env;
  const char* payload = nullptr;
  std::vector<size_t> offsets;  // per array, relative to payload

  const ArrayDesc& desc(size_t i) const { return env.arrays[i]; }
  int find(const std::string& name) const;  // -1 when absent
  template <class T>
  const T* array(size_t i) const { return reinterpret_cast<const T*>(payload + offsets[i]); }
};

// Decodes a received frame. `source` is the MPI source rank (or -1 for broadcasts); it must equal
// the envelope's sender. `expected` lists the acceptable kinds (empty = any).
Message decode(const char* data, size_t size, int source, const std::vector<Kind>& expected = {});

}  // namespace mpirl::wire
