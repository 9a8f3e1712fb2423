#include "learner/nonfinite_guard.h"

#include <cstdlib>

#include <spdlog/spdlog.h>

#include "core/test_hooks.h"

namespace mpirl::learner {

NonFiniteGuard::NonFiniteGuard(const Config& cfg, bool lead) : cfg_(cfg), lead_(lead) {
  if (const char* e = test_hook("MPIRL_TEST_NAN_AT_UPDATE")) nan_at_ = std::atoll(e);
}

std::string NonFiniteGuard::after_update(Trainer& trainer, int64_t version) {
  if (nan_at_ >= 0 && version == nan_at_) {
    trainer.inject_nan(true);
    if (lead_) spdlog::warn("MPIRL_TEST_NAN_AT_UPDATE: the loss is NaN from update {} on", version);
  }
  if (version % kCheckEvery != 0) return "";
  const auto nf = trainer.nonfinite();
  const std::string& policy = cfg_.learner.on_nonfinite;
  if (nf.skipped > reported_) {
    if (first_seen_ < 0) first_seen_ = version;
    if (lead_)
      spdlog::warn("updates {}-{}: {} optimizer step(s) skipped: the gradient norm was not finite (NaN or inf); "
                   "{} in a row, {} so far (learner.on_nonfinite = \"{}\")",
                   version - kCheckEvery + 1, version, nf.skipped - reported_, nf.in_a_row, nf.skipped, policy);
    reported_ = nf.skipped;
  }
  if (policy == "stop" && nf.skipped > 0) {
    stopped_ = fmt::format("a non-finite gradient norm by update {} (learner.on_nonfinite = \"stop\")", version);
  } else if (nf.in_a_row >= cfg_.learner.nonfinite_limit) {
    if (policy == "rollback" && rollbacks_ < kMaxRollbacks && trainer.restore(0.5)) {
      ++rollbacks_;
      if (lead_)
        spdlog::warn("update {}: {} non-finite steps in a row: rolled back to the last finite state, learning rate x{} "
                     "(rollback {} of {})",
                     version, nf.in_a_row, trainer.lr_factor(), rollbacks_, kMaxRollbacks);
      return "";
    }
    stopped_ = fmt::format("{} non-finite steps in a row by update {} (learner.on_nonfinite = \"{}\"{})", nf.in_a_row,
                           version, policy,
                           policy == "rollback" ? fmt::format(", after {} rollbacks", rollbacks_) : std::string());
  } else if (policy == "rollback" && nf.in_a_row == 0 && version % kSnapshotEvery == 0 && trainer.parameters_finite()) {
    trainer.snapshot();
  }
  if (stopped_.empty()) return "";
  if (lead_) spdlog::error("stopping: {}; the parameters are the last finite ones", stopped_);
  return "nonfinite";
}

nlohmann::json NonFiniteGuard::summary(Trainer& trainer) const {
  const auto nf = trainer.nonfinite();
  nlohmann::json j = {{"policy", cfg_.learner.on_nonfinite},
                      {"skipped_steps", nf.skipped},
                      {"in_a_row_at_end", nf.in_a_row},
                      {"first_seen_by_update", first_seen_ < 0 ? nlohmann::json(nullptr) : nlohmann::json(first_seen_)},
                      {"rollbacks", rollbacks_},
                      {"lr_factor", trainer.lr_factor()},
                      {"parameters_finite", trainer.parameters_finite()}};
  if (!stopped_.empty()) j["stopped"] = stopped_;
  return j;
}

}  // namespace mpirl::learner
