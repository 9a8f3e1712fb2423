"""The built-in policy's Python twin (python/mpirl_policy, equal to it to 5e-16 in float64:
ctest -R policy.twins) as a model.python factory, so that the same network runs built-in and as a
Python module: bench/python_model.sh compares the two.

    --set model.python='"bench/python_twin.py:make"' --set learner.value_norm='"none"'
    --set model.python='"bench/python_twin.py:make_scan"'   (recurrences through mpirl's scan)

The [model] options choose the network as they choose the built-in one. Observation normalisation
stays mpirl's (applied before the module), so the twin is built without its own.
"""
import types

import torch

from mpirl_policy.policy import EnvSpec, ModelOptions, Policy


def make(spec, options):
    env = EnvSpec(obs_shape=list(spec["obs_shape"]), obs_uint8=False, discrete=spec["discrete"],
                  num_actions=spec["num_actions"], action_dim=spec["action_dim"],
                  action_low=list(spec["action_low"]), action_high=list(spec["action_high"]), id=spec["id"])
    opts = ModelOptions(encoder=options["encoder"], hidden=list(options["hidden"]), activation=options["activation"],
                        core=options["core"], core_size=options["core_size"], core_state=options["core_state"],
                        obs_norm=False, critic=options["critic"])
    return Policy(env, opts)


def _complex_sequence(self, x, state0, is_init):
    """_ComplexRecurrence.sequence as one scan (mpirl_ops.linear_scan over complex64) instead of a
    loop over time: the same recurrence, as the C++ core runs it."""
    import mpirl_ops
    from mpirl_policy.cores import _keep, _merge, _split

    lr, li, ur, ui = self.drive(x)
    k = _keep(is_init)
    u = torch.complex(ur, ui)
    a = torch.complex(lr * k, li * k).expand_as(u).contiguous()
    hr, hi = _split(state0)
    h = mpirl_ops.linear_scan(a, u, torch.complex(hr.contiguous(), hi.contiguous()))
    return self.readout(h.real, h.imag, x), _merge(h[-1].real, h[-1].imag)


def _mingru_sequence(self, x, state0, is_init):
    import mpirl_ops
    from mpirl_policy.cores import _keep

    z = torch.sigmoid(self.z(x))
    h = mpirl_ops.linear_scan(((1 - z) * _keep(is_init)).contiguous(), (z * self.h(x)).contiguous(), state0)
    return h, h[-1]


def make_scan(spec, options):
    """As make, with the linear-recurrent cores' sequence mode run by mpirl's scan operator, as the
    built-in learner runs it (the reference package keeps its loop: TorchScript export needs no mpirl)."""
    from mpirl_policy.cores import MinGruCore, _ComplexRecurrence

    policy = make(spec, options)
    core = policy.core
    if isinstance(core, _ComplexRecurrence):
        core.sequence = types.MethodType(_complex_sequence, core)
    elif isinstance(core, MinGruCore):
        core.sequence = types.MethodType(_mingru_sequence, core)
    return policy
