#pragma once
// Python envs in an embedded interpreter (one per process; each actor rank is its own process, so
// there is no GIL contention). Ids:
//   "gym:<id>"                  gymnasium.make_vec(id, num_envs, vectorization_mode="sync") with
//                               autoreset_mode = SAME_STEP
//   "py:<module>:<factory>"     factory(num_envs=E, seed=S, **kwargs) returning a Gymnasium vector
//                               env whose autoreset mode is SAME_STEP or DISABLED
//   "ale:<game>"                ale-py's AtariVectorEnv (C++ threads, one Python call per step):
//                               84x84 grey, frame-skip 4, stack 4, sticky actions p = 0.25
//   "envpool:<task>"            envpool.make(task, "gymnasium") in sync mode; ended envs are reset
//                               at once through reset(env_id) so no step is an auto-reset step
//   "minatar:<game>"            MinAtar (uint8 [C, 10, 10] images of 0/255, minimal action set)
// Spaces: observations a float32/float64 Box [D] or [C, H, W] (copied as float32), or a uint8 Box
// [C, H, W] / [H, W] of images (kept uint8); actions Discrete(n) or a flat float Box. Anything
// else is a ConfigError naming the env and the space. The Python side is py_helper.inc.
// This header does not expose pybind11: only envs/ and the tests see the interpreter.
#include <memory>
#include <string>

#include "envs/vector_env.h"

namespace mpirl::envs {

// True for ids with a Python prefix (gym:, py:, ale:, envpool:, minatar:).
bool is_python_env(const std::string& id);

// Starts this process's embedded interpreter if it is not running yet (the Python mpirl was built
// against; this thread then holds the GIL, as for Python envs). models/python_model.cpp uses it.
void ensure_python();

class PyVectorEnv final : public VectorEnv {
 public:
  // kwargs_json: a JSON object of extra keyword arguments for make_vec / the factory ("" = none).
  // Throws ConfigError naming env.id when the env cannot be made or its spaces are unsupported.
  PyVectorEnv(const std::string& id, int num_envs, uint64_t seed, const std::string& kwargs_json = "");
  ~PyVectorEnv() override;
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride) override;
  void step(const int64_t* discrete, const float* box, const StepOutputs& out) override;
  bool render(int e, Frame& f) override;
  // Runs Python code with `venv` (the vector env) and `np` in scope: for tests (set a state).
  void exec(const std::string& code);

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
  EnvSpec spec_;
  int64_t vstep_ = 0;  // vector steps since the last reset
};

// The spec of a Python env (builds a one-env vector env, reads its spaces, closes it).
EnvSpec python_env_spec(const std::string& id, const std::string& kwargs_json = "");

// Runs Python code in the embedded interpreter (started on first use), e.g. to extend sys.path.
void python_exec(const std::string& code);

}  // namespace mpirl::envs
