#include "learner/algorithms/make_algorithm.h"

#include <functional>
#include <map>

#include "core/error.h"
#include "learner/algorithms/appo.h"
#include "learner/algorithms/impala.h"
#include "learner/algorithms/r2d2/r2d2.h"

namespace mpirl::learner {

std::unique_ptr<Algorithm> make_algorithm(const Config& cfg) {
  using Make = std::function<std::unique_ptr<Algorithm>(const Config&)>;
  static const std::map<std::string, Make> table = {
      {"impala", [](const Config&) { return std::make_unique<Impala>(); }},
      {"appo", [](const Config& c) { return std::make_unique<Appo>(c.learner.appo_epochs, c.learner.appo_minibatches,
                                                                  c.learner.appo_minibatch == "steps"); }},
      {"r2d2", [](const Config& c) { return std::make_unique<R2D2>(c.r2d2); }},
  };
  auto it = table.find(cfg.learner.algo);
  if (it == table.end()) throw ConfigError(fmt::format("'learner.algo': no algorithm '{}' (impala, appo, r2d2)", cfg.learner.algo));
  return it->second(cfg);
}

}  // namespace mpirl::learner
