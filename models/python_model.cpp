#include "models/python_model.h"

#include <pybind11/embed.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "envs/python/py_vector_env.h"
#include "models/model_options.h"
#include "models/policy_model.h"

namespace py = pybind11;

namespace mpirl::models {
namespace {

const char kHelper[] =
#include "models/python_model_helper.inc"
    ;

// The helper module, made once per process, in the interpreter Python envs use too.
py::module_& helper() {
  static py::module_* m = [] {
    envs::ensure_python();
    py::gil_scoped_acquire gil;
    auto* mod = new py::module_(py::module_::import("types").attr("ModuleType")("_mpirl_models"));
    py::exec(kHelper, mod->attr("__dict__"));
    return mod;
  }();
  return *m;
}

// A Python torch.Tensor for t: the same TensorImpl, no copy.
py::object wrap(const torch::Tensor& t) {
  PyObject* o = THPVariable_Wrap(t);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// The message of a Python error: a ModelError's own text, else the exception with its traceback.
std::string message(py::error_already_set& e) {
  if (e.matches(helper().attr("ModelError"))) return py::str(e.value()).cast<std::string>();
  return e.what();
}

py::dict spec_dict(const envs::EnvSpec& s) {
  py::dict d;
  d["id"] = s.id;
  d["obs_shape"] = s.obs_shape;
  d["obs_uint8"] = s.obs_uint8;
  d["discrete"] = s.discrete;
  d["num_actions"] = s.num_actions;
  d["action_dim"] = s.action_dim;
  d["action_low"] = s.action_low;
  d["action_high"] = s.action_high;
  d["max_episode_steps"] = s.max_episode_steps;
  return d;
}

// Where mpirl's Python packages (mpirl_ops, mpirl_policy) are: $MPIRL_PYTHON_DIR, the install's
// share/mpirl/python beside the binary, the source tree's python/ (as `mpirl export` looks).
std::vector<std::string> package_dirs() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("MPIRL_PYTHON_DIR")) out.emplace_back(env);
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path().parent_path() / "share" / "mpirl" / "python").string());
#ifdef MPIRL_SOURCE_PYTHON_DIR
  out.emplace_back(MPIRL_SOURCE_PYTHON_DIR);
#endif
  return out;
}

py::dict options_dict(const ModelOptions& o) {
  py::dict d;
  d["encoder"] = o.encoder;
  d["hidden"] = o.hidden;
  d["activation"] = o.activation;
  d["core"] = o.core;
  d["core_size"] = o.core_size;
  d["core_state"] = o.core_state;
  d["obs_norm"] = o.obs_norm;
  d["critic"] = o.critic;
  d["init"] = o.init;
  d["log_std_init"] = o.log_std_init;
  d["python"] = o.python;
  return d;
}

}  // namespace

struct __attribute__((visibility("hidden"))) PythonModel::Impl {  // pybind11 types are hidden
  py::object module, unroll, step;
};

PythonModel::PythonModel(const envs::EnvSpec& spec, const ModelOptions& opts)
    : impl_(std::make_unique<Impl>()), spec_(spec), where_(fmt::format("config key 'model.python' = \"{}\"", opts.python)) {
  py::module_& h = helper();
  py::gil_scoped_acquire gil;
  try {
    py::tuple r = h.attr("load")(opts.python, spec_dict(spec), options_dict(opts), package_dirs());
    impl_->module = r[0];
    S_ = r[1].cast<int64_t>();
    impl_->unroll = impl_->module.attr("unroll");
    impl_->step = impl_->module.attr("step");
  } catch (py::error_already_set& e) {
    throw ConfigError(fmt::format("{}: {}", where_, message(e)));
  }
}

PythonModel::~PythonModel() {
  if (!impl_ || !Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  impl_.reset();
}

namespace {
std::vector<std::pair<std::string, torch::Tensor>> named(const py::object& module, const char* method) {
  py::gil_scoped_acquire gil;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (py::handle item : module.attr(method)()) {
    auto pair = py::reinterpret_borrow<py::tuple>(item);
    out.emplace_back(pair[0].cast<std::string>(), THPVariable_Unpack(pair[1].ptr()));
  }
  return out;
}

torch::Tensor tensor_of(const py::handle& h, const std::string& where, const char* what) {
  if (!THPVariable_Check(h.ptr()))
    throw Error(fmt::format("{}: {} returned {} where a torch.Tensor was expected", where, what,
                            py::str(py::type::of(h).attr("__name__")).cast<std::string>()));
  return THPVariable_Unpack(h.ptr());
}

py::tuple results(const py::object& out, size_t n, const std::string& where, const char* what) {
  if (!py::isinstance<py::tuple>(out) && !py::isinstance<py::list>(out))
    throw Error(fmt::format("{}: {} returned {}, expected a tuple", where, what,
                            py::str(py::type::of(out).attr("__name__")).cast<std::string>()));
  py::tuple t = py::tuple(out);
  if (t.size() < n) throw Error(fmt::format("{}: {} returned {} values, expected {}", where, what, t.size(), n));
  return t;
}
}  // namespace

std::vector<std::pair<std::string, torch::Tensor>> PythonModel::parameters() const {
  return named(impl_->module, "named_parameters");
}

std::vector<std::pair<std::string, torch::Tensor>> PythonModel::buffers() const {
  return named(impl_->module, "named_buffers");
}

PolicyOutput PythonModel::unroll(const torch::Tensor& obs, const torch::Tensor& is_init, const torch::Tensor& state0) {
  py::gil_scoped_acquire gil;
  try {
    py::tuple t = results(impl_->unroll(wrap(obs), wrap(is_init), wrap(state0)), 2, where_, "unroll()");
    return {tensor_of(t[0], where_, "unroll()"), tensor_of(t[1], where_, "unroll()")};
  } catch (py::error_already_set& e) {
    throw Error(fmt::format("{}: unroll() raised an exception: {}", where_, message(e)));
  }
}

PolicyOutput PythonModel::step(const torch::Tensor& obs, const torch::Tensor& is_init, torch::Tensor& state) {
  py::gil_scoped_acquire gil;
  try {
    py::tuple t = results(impl_->step(wrap(obs), wrap(is_init), wrap(state)), 3, where_, "step()");
    PolicyOutput out{tensor_of(t[0], where_, "step()"), tensor_of(t[1], where_, "step()")};
    state = tensor_of(t[2], where_, "step()");
    return out;
  } catch (py::error_already_set& e) {
    throw Error(fmt::format("{}: step() raised an exception: {}", where_, message(e)));
  }
}

void PythonModel::check() {
  py::module_& h = helper();
  py::gil_scoped_acquire gil;
  try {
    h.attr("check")(impl_->module, spec_dict(spec_), S_);
  } catch (py::error_already_set& e) {
    throw ConfigError(fmt::format("{}: {}", where_, message(e)));
  }
}

int64_t python_state_size(const envs::EnvSpec& spec, const ModelOptions& opts) {
  return PythonModel(spec, opts).state_size();
}

GilRelease::GilRelease() {
  if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
}

GilRelease::~GilRelease() {
  if (state_) PyEval_RestoreThread(static_cast<PyThreadState*>(state_));
}

}  // namespace mpirl::models
