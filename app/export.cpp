// `mpirl export PATH --out FILE [--format torchscript|onnx]`: writes a saved policy (PATH: a run or
// checkpoint directory or a model file, as `mpirl eval` takes: find_policy) as a file that runs
// without mpirl (TorchScript: torch.jit.load(FILE)(obs); or ONNX), by running the Python
// package python/mpirl_policy (`python -m mpirl_policy.export`) in a child process with the
// package on PYTHONPATH. The package is looked for in $MPIRL_PYTHON_DIR, then next to the binary
// as installed (<prefix>/share/mpirl/python), then in the source tree it was built from.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "app/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "envs/vector_env.h"
#include "models/policy.h"
#include "models/policy_file.h"

namespace mpirl {
namespace {
namespace fs = std::filesystem;

// The directory holding mpirl_policy/, or "" (and the places looked at in `tried`).
std::string find_python_dir(std::string& tried) {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("MPIRL_PYTHON_DIR")) candidates.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "share" / "mpirl" / "python");
#ifdef MPIRL_SOURCE_PYTHON_DIR
  candidates.emplace_back(MPIRL_SOURCE_PYTHON_DIR);
#endif
  for (const auto& c : candidates) {
    if (fs::exists(c / "mpirl_policy" / "export.py", ec)) return c.string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  return "";
}

// A policy.json for a run that has none (runs from before it was written): the env built once
// from the run's config gives its spaces. Returns the temporary file's path.
std::string spec_from_env(const std::string& config_path) {
  Config cfg = load_run_config(config_path);
  cfg.env.num_envs = 1;
  auto venv = envs::make_vector_env(cfg, 1, 0);
  std::string path = (fs::temp_directory_path() / "mpirl-export-XXXXXX.json").string();
  const int fd = ::mkstemps(path.data(), 5);
  if (fd < 0) throw Error(fmt::format("cannot create a temporary file '{}'", path));
  ::close(fd);
  std::ofstream(path) << models::policy_spec_json(venv->spec(), models::model_options(cfg)).dump(2) << "\n";
  fmt::print(stderr, "mpirl export: no policy.json beside {} (an older run): the spaces of a fresh {} are used\n",
             config_path, cfg.env.id);
  return path;
}

// Runs `python -m mpirl_policy.export ARGS...` with `python_dir` first on PYTHONPATH; its exit code.
int run_python(const std::string& python, const std::string& python_dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s{python, "-m", "mpirl_policy.export"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Everything the child needs is made here: after fork() it only execs (torch or an embedded
  // Python may have threads, so the child must not allocate or take locks).
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = old && *old ? python_dir + ":" + old : python_dir;
  ::setenv("PYTHONPATH", path.c_str(), 1);
  const std::string fail = fmt::format("mpirl export: cannot run '{}' (set --python to a Python with torch)\n", python);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) {
    ::execvp(argv[0], argv.data());
    [[maybe_unused]] ssize_t w = ::write(2, fail.data(), fail.size());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error("waitpid failed");
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The interpreter mpirl was built with (it has torch), else python3 from PATH.
std::string default_python() {
#ifdef MPIRL_PYTHON_EXECUTABLE
  if (fs::exists(MPIRL_PYTHON_EXECUTABLE)) return MPIRL_PYTHON_EXECUTABLE;
#endif
  return "python3";
}

}  // namespace

int export_main(const std::string& what, const std::string& out, const std::string& format,
                const std::string& python) {
  std::string temp_spec;
  try {
    const PolicyFiles files = find_policy(what);  // a run or checkpoint directory, or a model file
    const std::string dir = fs::path(files.config).parent_path().string();
    std::string tried;
    const std::string python_dir = find_python_dir(tried);
    if (python_dir.empty())
      throw Error(fmt::format("the Python package mpirl_policy was not found (looked in {}); set MPIRL_PYTHON_DIR "
                              "to the directory holding mpirl_policy/",
                              tried));
    std::vector<std::string> args{dir.empty() ? "." : dir, "--model", files.model, "--out", out, "--format", format};
    if (!fs::exists(fs::path(files.config).parent_path() / "policy.json")) {
      temp_spec = spec_from_env(files.config);
      args.insert(args.end(), {"--spec", temp_spec});
    }
    const int rc = run_python(python.empty() ? default_python() : python, python_dir, args);
    if (!temp_spec.empty()) fs::remove(temp_spec);
    return rc;
  } catch (const std::exception& e) {
    if (!temp_spec.empty()) fs::remove(temp_spec);
    fmt::print(stderr, "mpirl export: {}\n", e.what());
    return 2;
  }
}

}  // namespace mpirl
