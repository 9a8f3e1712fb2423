"""The built-in policy's Python twin (python/mpirl_policy, equal to it to 5e-16 in float64:
ctest -R policy.twins) as a model.python factory, so that the same network runs built-in and as a
Python module: bench/python_model.sh compares the two.

    --set model.python='"bench/python_twin.py:make"' --set learner.value_norm='"none"'

The [model] options choose the network as they choose the built-in one. Observation normalisation
stays mpirl's (applied before the module), so the twin is built without its own.
"""
from mpirl_policy.policy import EnvSpec, ModelOptions, Policy


def make(spec, options):
    env = EnvSpec(obs_shape=list(spec["obs_shape"]), obs_uint8=False, discrete=spec["discrete"],
                  num_actions=spec["num_actions"], action_dim=spec["action_dim"],
                  action_low=list(spec["action_low"]), action_high=list(spec["action_high"]), id=spec["id"])
    opts = ModelOptions(encoder=options["encoder"], hidden=list(options["hidden"]), activation=options["activation"],
                        core=options["core"], core_size=options["core_size"], core_state=options["core_state"],
                        obs_norm=False, critic=options["critic"])
    return Policy(env, opts)
