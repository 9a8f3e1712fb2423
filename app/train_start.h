#pragma once
// How a `mpirl train` run starts, decided on rank 0: the request checked, then a new run directory
// or the newest complete checkpoint to resume from. Private to app/ (app/train.cpp sends it to every rank).
#include <string>
#include <vector>

#include "core/run_dir.h"

namespace mpirl::detail {

// Rank 0 validates everything that can be wrong with the request; the verdict, the resolved
// config and how the run starts go to every rank, so all of them exit 2 together on a bad config.
struct Verdict {
  std::string error, config_toml;
  std::string finished;  // a resumed run that has already met its stop conditions: why (exit 0, nothing done)
  RunStart start;
};

// The verdict on `mpirl train`'s config file, --set overrides and --resume directory ("" = none)
// for `world` ranks on `hosts`: a bad config, checkpoint or run directory is reported in `error`.
Verdict validate_on_rank0(const std::string& file, const std::vector<std::string>& overrides,
                          const std::string& resume_dir, int world, const std::vector<std::string>& hosts);

}  // namespace mpirl::detail
