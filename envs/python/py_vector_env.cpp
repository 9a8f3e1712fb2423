#include "envs/python/py_vector_env.h"

#include <pybind11/embed.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "envs/python/py_arrays.h"

namespace py = pybind11;

namespace mpirl::envs {
using detail::copy_obs;
using detail::vec;

namespace {

const char kHelper[] =
#include "envs/python/py_helper.inc"
    ;

// The helper module, made once per process. The interpreter is never finalized: envs may hold
// native resources whose teardown at exit is not worth the risk.
py::module_& helper() {
  static py::module_* m = [] {
    // numpy's BLAS pool would add idle threads to every rank; gym envs step tiny arrays.
    ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
    if (!Py_IsInitialized()) {
      // The interpreter mpirl was built against (sys.executable at configure time, so a venv
      // works too): left to itself, an embedded Python looks up "python3" on PATH and may pick
      // another installation (/usr's) with none of the packages. PYTHONHOME still overrides.
      PyConfig config;
      PyConfig_InitPythonConfig(&config);
      config.parse_argv = 0;
      config.install_signal_handlers = 0;  // mpirl's SIGUSR1/SIGTERM handling stays as it is
      PyConfig_SetBytesString(&config, &config.program_name, MPIRL_PYTHON_EXECUTABLE);
      py::initialize_interpreter(&config, 0, nullptr, false);
    }
    auto* mod = new py::module_(py::module_::import("types").attr("ModuleType")("_mpirl_envs"));
    py::exec(kHelper, mod->attr("__dict__"));
    return mod;
  }();
  return *m;
}

// The first line of a Python error (its type and message) and, for the log, the rest.
std::string py_message(const py::error_already_set& e) { return e.what(); }

EnvSpec spec_from(const std::string& id, const py::dict& d, bool* same_step) {
  EnvSpec s;
  s.id = id;
  s.obs_shape = d["obs_shape"].cast<std::vector<int64_t>>();
  s.obs_uint8 = d["obs_uint8"].cast<bool>();
  s.discrete = d["discrete"].cast<bool>();
  s.num_actions = d["num_actions"].cast<int64_t>();
  s.action_dim = d["action_dim"].cast<int64_t>();
  s.action_low = d["low"].cast<std::vector<float>>();
  s.action_high = d["high"].cast<std::vector<float>>();
  s.max_episode_steps = d["max_episode_steps"].cast<int64_t>();
  s.description = "Python env";
  *same_step = d["same_step"].cast<bool>();
  return s;
}

// Makes the vector env and reads its spec; every failure is a config error naming env.id.
py::object make_venv(const std::string& id, int num_envs, uint64_t seed, const std::string& kwargs, EnvSpec* spec,
                     bool* same_step) {
  try {
    py::module_& h = helper();
    py::object venv = h.attr("make")(id, num_envs, seed, kwargs);
    *spec = spec_from(id, h.attr("describe")(venv).cast<py::dict>(), same_step);
    return venv;
  } catch (const py::error_already_set& e) {
    std::string hint;
    if (id.rfind("py:", 0) == 0 && e.matches(PyExc_ModuleNotFoundError)) {
      char cwd[4096] = "?";
      if (!::getcwd(cwd, sizeof(cwd))) cwd[0] = '?', cwd[1] = 0;
      const char* pp = std::getenv("PYTHONPATH");
      hint = fmt::format(
          " (py: modules are imported from the directory mpirl runs in, here '{}', and from PYTHONPATH, here {}: run "
          "from the directory that holds your module, or export PYTHONPATH=/path/to/its/dir -- mpirun passes it to "
          "every rank with -x PYTHONPATH; a package the module imports must be installed in the Python mpirl embeds, "
          "{})",
          cwd, pp && *pp ? fmt::format("'{}'", pp) : std::string("unset"), MPIRL_PYTHON_EXECUTABLE);
    } else if (e.matches(PyExc_ImportError)) {
      hint = fmt::format(" (is it installed in the Python mpirl embeds, {}? scripts/setup.sh installs gymnasium, "
                         "ale-py, envpool and minatar there)", MPIRL_PYTHON_EXECUTABLE);
    }
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": {}{}", id, py_message(e), hint));
  } catch (const py::builtin_exception& e) {  // e.g. a cast of what describe() found
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": {}", id, e.what()));
  }
}

}  // namespace

bool is_python_env(const std::string& id) {
  for (const char* p : {"gym:", "py:", "ale:", "envpool:", "minatar:"})
    if (id.rfind(p, 0) == 0) return true;
  return false;
}

void ensure_python() { helper(); }

void python_exec(const std::string& code) {
  helper();
  try {
    py::exec(code);
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("python_exec: {}", py_message(e)));
  }
}

struct __attribute__((visibility("hidden"))) PyVectorEnv::Impl {  // pybind11 types are hidden
  py::object venv, step_fn, reset_fn, expand_dims;
  bool same_step = true;
  uint64_t seed = 0;
  std::vector<uint8_t> done, final_row;  // per env, this step; one final observation (SAME_STEP)
};

PyVectorEnv::PyVectorEnv(const std::string& id, int num_envs, uint64_t seed, const std::string& kwargs_json)
    : p_(std::make_unique<Impl>()) {
  MPIRL_CHECK(num_envs >= 1, "num_envs = {}", num_envs);
  p_->venv = make_venv(id, num_envs, seed, kwargs_json, &spec_, &p_->same_step);
  p_->step_fn = p_->venv.attr("step");
  p_->reset_fn = p_->venv.attr("reset");
  p_->seed = seed;
  p_->done.assign(size_t(num_envs), 0);
  p_->final_row.resize(size_t(spec_.obs_bytes()));
  p_->expand_dims = py::module_::import("numpy").attr("expand_dims");
  init_bookkeeping(num_envs, spec_);
}

PyVectorEnv::~PyVectorEnv() = default;


void PyVectorEnv::reset(void* obs, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride) {
  const int E = size();
  auto where = [&] { return fmt::format("env '{}' on actor {} at reset", spec_.id, mpirl::where()); };
  try {
    py::tuple r = p_->reset_fn(py::arg("seed") = py::int_(p_->seed));
    if (int bad = copy_obs(r[0], spec_, E, obs, obs_stride, nullptr, where); bad >= 0)
      throw Error(fmt::format("{}: env index {} returned a non-finite observation", where(), bad));
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("{}: Python exception: {}", where(), py_message(e)));
  } catch (const py::builtin_exception& e) {  // e.g. reset() did not return a tuple
    throw Error(fmt::format("{}: {}", where(), e.what()));
  }
  for (int e = 0; e < E; ++e) {
    is_init[e * is_init_stride] = 1;
    start_episode(e);
  }
  vstep_ = 0;
}

void PyVectorEnv::step(const int64_t* discrete, const float* box, const StepOutputs& out) {
  const int E = size();
  const int64_t A = spec_.action_dim;
  ++vstep_;
  auto where = [&] {
    return fmt::format("env '{}' on actor {} at vector step {} (env indices 0..{})", spec_.id, mpirl::where(), vstep_,
                       E - 1);
  };
  try {
    py::object actions;
    if (spec_.discrete) {
      for (int e = 0; e < E; ++e)
        MPIRL_CHECK(discrete[e] >= 0 && discrete[e] < spec_.num_actions, "action {} out of range for {}", discrete[e], spec_.id);
      actions = py::array_t<int64_t>(E, discrete);
    } else {
      py::array_t<float> a({int64_t(E), A});
      float* d = a.mutable_data();
      for (int e = 0; e < E; ++e)
        for (int64_t i = 0; i < A; ++i)
          d[e * A + i] = std::clamp(box[e * A + i], spec_.action_low[size_t(i)], spec_.action_high[size_t(i)]);
      actions = std::move(a);
    }
    py::object res = p_->step_fn(actions);
    if (!py::isinstance<py::tuple>(res) || py::len(res) != 5)
      throw Error(fmt::format("{}: step() returned {}, expected (obs, reward, terminated, truncated, info)", where(),
                              std::string(py::repr(res)).substr(0, 200)));
    py::tuple r = res;
    auto rew = vec<double>(r[1], E, "reward", where);
    auto term = vec<bool>(r[2], E, "terminated", where);
    auto trunc = vec<bool>(r[3], E, "truncated", where);
    const int bad_obs = copy_obs(r[0], spec_, E, out.obs, out.obs_stride, nullptr, where);
    py::object info = r[4];
    bool any_done = false;
    for (int e = 0; e < E; ++e) {
      const uint8_t* o = static_cast<const uint8_t*>(out.obs) + e * out.obs_stride * spec_.obs_elem_bytes();
      const float reward = float(rew.data()[e]);
      const bool done = term.data()[e] || trunc.data()[e];
      p_->done[size_t(e)] = done;
      any_done |= done;
      // SAME_STEP: `obs` row e is already the reset observation; the episode's last one is in
      // info["final_obs"][e]. DISABLED: row e is the last one; the env is reset below.
      const uint8_t* last = o;
      bool last_finite = true;
      if (done && p_->same_step) {
        py::object f = helper().attr("final_obs")(info, e);
        if (f.is_none())
          throw Error(fmt::format("{}: env index {} ended its episode but info has no 'final_obs' for it", where(), e));
        last_finite = copy_obs(p_->expand_dims(f, 0), spec_, 1, p_->final_row.data(), 0, nullptr, where) < 0;
        last = p_->final_row.data();
      }
      if (!std::isfinite(reward) || bad_obs == e || !last_finite)
        throw Error(fmt::format("{}: env index {} returned a non-finite {} at episode step {}", where(), e,
                                std::isfinite(reward) ? "observation" : "reward", episode_step(e) + 1));
      const int64_t s = e * out.scalar_stride;
      out.reward[s] = reward;
      out.terminated[s] = term.data()[e];
      out.truncated[s] = trunc.data()[e];
      count_step(e, reward, done, last);
      out.is_init[e * out.is_init_stride] = done;
    }
    if (any_done && !p_->same_step) {
      py::array_t<bool> mask(E);
      for (int e = 0; e < E; ++e) mask.mutable_data()[e] = p_->done[size_t(e)];
      py::dict options;
      options["reset_mask"] = mask;
      py::tuple rr = p_->reset_fn(py::arg("options") = options);
      if (int bad = copy_obs(rr[0], spec_, E, out.obs, out.obs_stride, p_->done.data(), where); bad >= 0)
        throw Error(fmt::format("{}: env index {} returned a non-finite observation at reset", where(), bad));
    }
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("{}: Python exception: {}", where(), py_message(e)));
  } catch (const py::builtin_exception& e) {  // e.g. reset() did not return a tuple
    throw Error(fmt::format("{}: {}", where(), e.what()));
  }
}

bool PyVectorEnv::render(int e, Frame& f) {
  try {
    py::object r = helper().attr("render_env")(p_->venv, e);
    if (r.is_none()) return false;
    auto a = r.cast<py::array_t<uint8_t, py::array::c_style | py::array::forcecast>>();
    if (a.ndim() != 3 || a.shape(2) != 3) return false;
    f.h = int(a.shape(0));
    f.w = int(a.shape(1));
    f.rgb.assign(a.data(), a.data() + a.size());
    return true;
  } catch (const py::error_already_set& ex) {
    throw Error(fmt::format("env '{}': render() failed: {}", spec_.id, py_message(ex)));
  }
}

void PyVectorEnv::exec(const std::string& code) {
  try {
    py::dict scope;
    scope["venv"] = p_->venv;
    scope["np"] = py::module_::import("numpy");
    py::exec(code, scope);
  } catch (const py::error_already_set& e) {
    throw Error(fmt::format("PyVectorEnv::exec: {}", py_message(e)));
  }
}

EnvSpec python_env_spec(const std::string& id, const std::string& kwargs_json) {
  EnvSpec spec;
  bool same_step = true;
  py::object venv = make_venv(id, 1, 0, kwargs_json, &spec, &same_step);
  try {
    venv.attr("close")();
  } catch (const py::error_already_set&) {
  }
  return spec;
}

}  // namespace mpirl::envs
