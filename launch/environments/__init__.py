"""The environments a run acts in: gymnasium, numpy and the networks' space checks only.

Nothing here imports the run's wiring (the rest of `launch/`); the wiring and the
tools import these modules by name:

- `factory`: `make_env`, `make_vector_env` (vector environments, vector rewards),
  `check_spaces`;
- `suites`: MinAtar, Atari and MuJoCo behind their extras, with their wrappers;
- `bandits`: the meta-RL bandits (`Bandit-*-v0`), registered on import;
- `partially_observed`: `PendulumNoVelocity-v1`;
- `action_repeat`: `--step_mul`, fixed or learned, as env wrappers;
- `task_sequence`, `shared_spaces`: the vector env of a task sequence (`--tasks`)
  and the spaces its tasks share.

This file imports nothing, so importing `suites` or `bandits` alone loads no
TensorFlow and none of the networks (`launch/tools/evaluate.py` plays a SavedModel
behind them without the training library).
"""


class EnvironmentSetupError(ValueError):
    """An environment id that cannot be made, or spaces no agent handles (one line)."""
