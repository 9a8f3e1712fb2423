// `mpirl replay roundtrip IN OUT`: restores a dump into a buffer and dumps it again.
#include <fmt/format.h>

#include "buffer/hdf5_dump.h"
#include "buffer/replay.h"
#include "core/error.h"
#include "envs/registry.h"
#include "models/policy.h"

namespace mpirl::buffer {

int replay_roundtrip_main(const std::string& in, const std::string& out) {
  try {
    auto h = read_dump_header(in);
    Config cfg = parse_resolved_config(h.config);
    auto spec = envs::env_spec(cfg);
    auto layout = SeqLayout(spec, cfg.actor.rollout_len, models::state_size(cfg, spec), seq_layout_priority(cfg));
    ReplayOptions o;
    o.capacity = h.capacity;
    o.selector = h.selector;
    o.max_times_sampled = cfg.replay.max_times_sampled;
    o.priority_exponent = cfg.replay.priority_exponent;
    ReplayBuffer rb(layout, o);
    restore_replay(rb, in, cfg.env.id);
    auto info = dump_replay(rb, out, cfg.env.id, h.config);
    fmt::print("restored {} items from {} and dumped them to {}: CRC-32 {:08x} (input {:08x})\n", info.items, in, out,
               info.checksum, h.checksum);
    return info.checksum == h.checksum ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl replay roundtrip: {}\n", e.what());
    return 2;
  }
}

}  // namespace mpirl::buffer
