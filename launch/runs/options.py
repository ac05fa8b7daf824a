"""The run's own options (not an agent's): environment, budget, logdir, cadence."""

import ast
import dataclasses
import re
from typing import Any, Dict, Mapping, Optional, Tuple

from reverb_agents.agents import search
from reverb_agents.agents.configs import require, require_fraction

# networks.torsos.PRECISIONS, named here because this module imports no TensorFlow.
TORSO_PRECISIONS = ('float32', 'bfloat16')

TRACKERS = ('', 'mlflow')  # --tracker: none, or MLflow (`launch/learning/trackers.py`)
VECTOR_ENVS = ('', 'sync', 'async', 'ale')  # '': the environment's own vectorised version, else sync
# A deterministic run's cadences in learner steps where none is given: a timed one would
# land on different steps in every run.
DETERMINISTIC_LOG_STEPS = 100  # progress.csv rows
DETERMINISTIC_CHECKPOINT_STEPS = 10_000  # checkpoints
# Run options worth tuning, as the agents' config fields declare theirs (`agents.search`):
# the environments per actor set how many env steps each learner update costs.
SEARCH = {'num_envs': search.Choice(8, 16, 32, 64)}
CURVE_POINTS = 50  # progress rows and summaries a run writes at least (by env steps)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    agent: str = 'clear'
    env: str = 'CartPole-v1'
    num_envs: int = 64  # environments per actor, stepped together
    num_steps: int = 300_000  # env-step budget
    seed: int = 0
    logdir: str = ''  # the run's directory (`launch/run.py` names a new one when not given)
    env_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # gymnasium.make's
    vector_env: str = ''  # one of VECTOR_ENVS: how the actor's environments are stepped
    eval_episodes: int = 20  # greedy evaluation episodes at the end
    eval_epsilon: float = 0.0  # evaluation samples from the policy with this probability
    target_return: Optional[float] = None  # stop early when the last 20 episodes average this
    target_greedy: bool = True  # ... and a greedy evaluation (eval_episodes) reaches it too
    log_interval_s: float = 2.0  # seconds between progress.csv rows (and lines off a terminal)
    checkpoint_interval_s: float = 60.0  # seconds between learner checkpoints
    publish_period: int = 5  # learner steps between weight publications
    summary_interval_s: float = 2.0  # seconds between TensorBoard writes (and NaN checks)
    # Task sequences (`launch/environments/task_sequence.py`): `env` is then the ids joined
    # by commas.
    steps_per_task: int = 0  # env steps per visit of a task; 0: one environment, no sequence
    task_cycles: int = 1  # times the sequence is gone through
    eval_every_steps: int = 0  # env steps between evaluations; 0: none (a sequence: 5 per visit)
    # Action repeat (`launch/environments/action_repeat.py`).
    step_mul: int = 1  # frames per decision at most; 1: off
    fixed_step_mul: bool = False  # repeat every action step_mul times (else the policy picks)
    save_replay: bool = False  # in-process: checkpoint the Reverb tables with the learner
    export: bool = True  # write the final policy as a SavedModel, <logdir>/saved_model
    launcher: str = 'inprocess'  # what runs the roles (summary.json): inprocess, multiprocess, ray
    intra_op_threads: int = 0  # TensorFlow's threads within one op; 0: its default (one per core)
    torso_precision: str = 'float32'  # image torsos' compute: float32 or bfloat16 (networks.torsos)
    log_interval_steps: int = 0  # learner steps between progress.csv rows; 0: log_interval_s
    checkpoint_interval_steps: int = 0  # learner steps between checkpoints; 0: by seconds
    # In-process only: one seeded schedule of acting and learning, the same results for
    # the same seed bit for bit (`launch/runners/deterministic.py`).
    deterministic: bool = False
    # An experiment tracker the run reports to (`launch/learning/trackers.py`), in-process.
    tracker: str = ''  # one of TRACKERS
    tracking_uri: str = ''  # its store ('': MLFLOW_TRACKING_URI, else ./mlruns)

    def __post_init__(self):
        for name in ('num_envs', 'num_steps', 'eval_episodes', 'publish_period'):
            value = getattr(self, name)
            require(value >= 1, f'{name} must be >= 1, got {value}')
        for name in ('log_interval_s', 'checkpoint_interval_s', 'summary_interval_s'):
            value = getattr(self, name)
            require(value > 0, f'{name} must be positive (seconds), got {value}')
        for name in ('log_interval_steps', 'checkpoint_interval_steps'):
            value = getattr(self, name)
            require(value >= 0, f'{name} must be >= 0 (0: by seconds), got {value}')
        require(not self.deterministic or self.launcher == 'inprocess',
                f'--deterministic runs in one process (--launcher=inprocess), where one '
                f'schedule orders acting and learning; got --launcher={self.launcher}')
        require(self.intra_op_threads >= 0,
                f'intra_op_threads must be >= 0 (0: TensorFlow\'s default), '
                f'got {self.intra_op_threads}')
        require_fraction(self, 'eval_epsilon')
        require(self.torso_precision in TORSO_PRECISIONS,
                f'torso_precision must be one of {TORSO_PRECISIONS}, got {self.torso_precision!r}')
        require(self.tracker in TRACKERS,
                f'tracker must be one of {TRACKERS[1:]} (or unset), got {self.tracker!r}')
        require(not self.tracker or self.launcher == 'inprocess',
                f'--tracker={self.tracker} reports an in-process run; got '
                f'--launcher={self.launcher}')
        require(self.vector_env in VECTOR_ENVS,
                f'vector_env must be one of {[v for v in VECTOR_ENVS if v]}, '
                f'got {self.vector_env!r}')
        require(self.eval_every_steps >= 0,
                f'eval_every_steps must be >= 0, got {self.eval_every_steps}')
        require(not (self.env_kwargs and self.is_sequence),
                '--env_kwargs applies to one --env, not to a task sequence')
        require(self.step_mul >= 1, f'step_mul must be >= 1 (1: no repeat), got {self.step_mul}')
        require(self.step_mul == 1 or not self.is_sequence,
                '--step_mul does not combine with --tasks')
        if self.is_sequence:
            require(self.steps_per_task >= 1,
                    f'steps_per_task must be >= 1 with --tasks, got {self.steps_per_task}')
            require(self.task_cycles >= 1, f'task_cycles must be >= 1, got {self.task_cycles}')
            require(self.target_return is None,
                    '--target_return does not apply to a task sequence (it runs every visit)')

    @property
    def progress_row_steps(self) -> int:
        """Learner steps between progress.csv rows; 0: every `log_interval_s` seconds."""
        return self.log_interval_steps or (DETERMINISTIC_LOG_STEPS if self.deterministic else 0)

    @property
    def curve_env_steps(self) -> int:
        """Env steps between progress rows and summaries besides their time cadence:
        the budget over `CURVE_POINTS`, so a run of seconds still leaves a curve."""
        return max(1, self.num_steps // CURVE_POINTS)

    @property
    def checkpoint_steps(self) -> int:
        """Learner steps between checkpoints; 0: every `checkpoint_interval_s` seconds."""
        return self.checkpoint_interval_steps or (
            DETERMINISTIC_CHECKPOINT_STEPS if self.deterministic else 0)

    @property
    def learned_step_mul(self) -> bool:
        """True when the policy chooses the repeat (`--step_mul` > 1, not fixed)."""
        return self.step_mul > 1 and not self.fixed_step_mul

    @property
    def env_options(self) -> dict:
        """What, besides `env`, makes the run's environments (`run_config.json`)."""
        out = {}
        if self.is_sequence:
            out.update(steps_per_task=self.steps_per_task, task_cycles=self.task_cycles)
        if self.step_mul > 1:
            out.update(step_mul=self.step_mul, fixed_step_mul=self.fixed_step_mul)
        if self.env_kwargs:
            out.update(env_kwargs=dict(self.env_kwargs))
        return out

    @property
    def tasks(self) -> Tuple[str, ...]:
        """The environment ids of `env` ('A,B' -> ('A', 'B'); one id -> (id,))."""
        return tuple(self.env.split(','))

    @property
    def is_sequence(self) -> bool:
        """True for a task sequence (`--tasks`)."""
        return self.steps_per_task != 0 or len(self.tasks) > 1

    @property
    def sequence_steps(self) -> int:
        """The env steps of the whole sequence: tasks x steps per task x cycles."""
        return len(self.tasks) * self.steps_per_task * self.task_cycles

    @property
    def eval_interval(self) -> int:
        """Env steps between evaluations during training: `eval_every_steps`; for a
        sequence five per visit by default; 0: none."""
        if self.is_sequence:
            return self.eval_every_steps or max(1, self.steps_per_task // 5)
        return self.eval_every_steps


def parse_env_kwargs(text: str) -> Dict[str, Any]:
    """'difficulty=hard,horizon=50' -> {'difficulty': 'hard', 'horizon': 50}; a comma
    inside a value is kept when the next part is not `name=` (`shape=(2,3)`)."""
    if not text.strip():
        return {}
    out = {}
    for part in re.split(r',(?=\s*[A-Za-z_]\w*\s*=)', text):
        key, eq, value = part.partition('=')
        key = key.strip()
        if not eq or not key.isidentifier():
            raise ValueError(f'--env_kwargs takes key=value pairs separated by commas, '
                             f'got {part!r}')
        if key in out:
            raise ValueError(f'--env_kwargs gives {key!r} twice')
        value = value.strip()
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out
