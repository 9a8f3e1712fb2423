#include "app/omp_wait.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>

#include "core/config.h"

namespace mpirl {

// Spins before an idle libgomp thread sleeps (libgomp's default: 300,000). bench/omp_wait.sh's runs on
// the dev VM (Breakout, configs/minatar.toml, 1M steps; env steps/s alone / each of two at once):
// 300,000: 25.6k / 1.9k; 10,000: 25.2k / 6.8k; 1,000: 20.9k / 11.8k; 0 (PASSIVE): 18.6k / 13.2k.
constexpr const char* kSpinCount = "10000";

void shorten_openmp_spin_waits(char** argv, const std::string& config_file,
                               const std::vector<std::string>& overrides, const std::string& resume_dir) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  int threads = 1;
  try {
    const std::string file = !config_file.empty() ? config_file
                             : !resume_dir.empty() ? resume_dir + "/config.toml"
                                                   : std::string();
    const Config cfg = load_config(file, overrides);
    threads = std::max({cfg.learner.threads, cfg.actor.threads, cfg.inference.threads, cfg.eval.threads});
  } catch (const std::exception&) {
    return;  // train_main loads the config again and says what is wrong with it
  }
  if (threads <= 1) return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0) return;  // else the next image would exec again
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // exec failed: this image's libgomp keeps its default, say so truthfully
}

}  // namespace mpirl
