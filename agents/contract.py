"""The agent contract: everything the wiring in `launch/` reads from an agent.

An agent is a sub-package of `agents/` (`agents/clear`, `agents/acer`,
`agents/sac`) that a newcomer can read alone: a config, pure losses, a
learner, and one `Agent` object, listed in `agents/registry.py`. The wiring
(`launch/`) builds environments, the Reverb server and its tables, the
actors, the learner loop and the export for *any* agent from what that
object declares here, and from nothing else: it never reads an agent's
config fields, never imports an agent's modules, and never asks which agent
it is running.

What an agent declares:

1. `config_class`: a frozen dataclass built with `agents.configs` (one
   documented `field` per knob, checks in `__post_init__`, the shared
   `optimizer` and `replay` sub-configs). Its fields become the flags of the
   same names.
2. `data_plan(config)` -> `DataPlan`: the shape of its data. What a stored
   sequence is (length, period), what one learner batch is (how many
   sequences, how many transitions each contributes), how many rows come
   from `replay` and how many from `queue`, the table sizes, a
   sample-to-insert ratio if the agent fixes one, how fresh and replayed
   sequences make batches (`mixing`, a `replay.mixing` strategy: mixed batches
   by default, a `ReplaySchedule` when they alternate between the tables as
   ACER's do, or a strategy of the agent's own), and the `replay` sampler:
   uniform, or prioritized with `priority_exponent`.
   A prioritized agent's `step` also returns `PRIORITIES`: each batch row's
   new priority `[B]`, which the wiring writes back to Reverb for the
   replayed rows (`agents.priorities`, `replay.priorities`).
3. `build_core(observation_space, action_space, config)` -> the acting core
   (`networks.cores.ActorCriticCore`): what the actors run, what the
   learner publishes, what is exported.
4. `build_learner(make_core, action_space, config)` -> a `Learner` (the base
   class below, with the defaults of what a learner may leave out): the
   learner owns the core `make_core()` returns (and may call it again for
   copies, e.g. ACER's average network).
5. `metric_names(config, action_space)`: the scalar names `Learner.step`
   returns (the TensorBoard names); the contract test holds every agent to it.
6. `squash_actions`: continuous actions as tanh-squashed Gaussians in
   [-1, 1] (SAC) rather than unbounded Gaussians.
7. `reward_weights(config)`: the weights of a vector reward, when the agent
   learns one (else None: the environment must have scalar rewards);
   `for_reward_size(config, k)`: the config for an environment whose rewards
   have k components (0: scalars), e.g. unset weights become the plain sum;
   `for_tasks(config, n)`: the config for a run over n tasks (1 outside a
   task sequence), e.g. one value output per task (CLEAR's multi-task PopArt);
   each stored step names its task (`replay.trajectory.Step.task`).
8. `demo_files(config)`: demonstration files the learner will read
   (`replay.demos`), which the wiring checks against the environment first.
9. `run_defaults`: run options (`launch.runs.options.RunOptions` fields such as
   `num_envs`, `num_steps`) this agent defaults differently.

What an agent may assume: batches arrive in `replay.dataset.Batch`'s
time-major layout with `data_plan`'s sequence length and rows; the learner
is checkpointed whole with `tf.train.Checkpoint(learner=...)`; `set_progress`
is called before every step with the fraction of the env-step budget spent.
"""

import abc
import dataclasses
from typing import Any, Callable, ContextManager, Dict, Mapping, Optional, Tuple

import tensorflow as tf

from reverb_agents.agents import priorities
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.replay.batches import split_batch
from reverb_agents.replay.mixing import MixedBatches, Mixing, ReplaySchedule


@dataclasses.dataclass(frozen=True)
class DataPlan:
    """How an agent's experience flows through Reverb.

    A *sequence* is `sequence_length` consecutive steps of one environment
    (`replay.trajectory.Sequence`); table sizes count sequences. A learner
    batch is `batch_sequences` sequences, each contributing `learned_steps`
    transitions (the rest of a sequence bootstraps, looks ahead or burns in).
    """
    sequence_length: int  # steps in one stored sequence
    sequence_period: int  # steps between the starts of one environment's consecutive sequences
    learned_steps: int  # transitions a learner step learns from in one sequence
    batch_sequences: int  # sequences in one learner batch
    replay_fraction: float  # share of a batch's sequences from `replay` (mixed batches)
    replay_size: int  # sequences `replay` keeps
    queue_size: int  # sequences `queue` buffers
    min_replay_size: int  # sequences in `replay` before it can be sampled (sampling waits)
    replay_eviction: str = 'fifo'  # 'fifo' or 'reservoir' (random discard)
    samples_per_insert: Optional[float] = None  # replayed sequences per inserted one, held by Reverb
    group_envs: bool = False  # one item holds the same steps of all an actor's environments
    random_steps: int = 0  # each actor's first env steps take uniformly random actions
    # How fresh and replayed sequences make batches (`replay.mixing`); None: mixed
    # batches of `replay_fraction` (`MixedBatches`).
    mixing: Optional[Mixing] = None
    priority_exponent: Optional[float] = None  # `replay` samples by priority^this; None: uniform

    def __post_init__(self):
        split_batch(self.batch_sequences, self.replay_fraction)  # replay_fraction in [0, 1]
        checks = [
            (self.sequence_length >= 2, 'a sequence needs >= 2 steps (the last one bootstraps)'),
            (1 <= self.sequence_period < self.sequence_length,
             'sequence_period must be in [1, sequence_length - 1] (consecutive sequences '
             'overlap by the bootstrap step)'),
            (1 <= self.learned_steps < self.sequence_length,
             'learned_steps must be in [1, sequence_length - 1]'),
            (self.batch_sequences >= 1, 'batch_sequences must be >= 1'),
            (self.priority_exponent is None or self.priority_exponent >= 0,
             'priority_exponent must be >= 0'),
            (not isinstance(self.mixing, ReplaySchedule) or self.replay_fraction == 0.0,
             'a ReplaySchedule alternates whole batches: its on-policy batch has '
             'replay_fraction 0'),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f'{message}; got {self}')

    @property
    def num_replayed(self) -> int:
        """Replayed sequences in a mixed batch."""
        return split_batch(self.batch_sequences, self.replay_fraction)[1]

    @property
    def num_fresh(self) -> int:
        """Fresh (on-policy) sequences in a mixed batch."""
        return split_batch(self.batch_sequences, self.replay_fraction)[0]

    @property
    def batch_mixing(self) -> Mixing:
        """The strategy the learner's batches come from (`mixing`, or mixed batches of
        `replay_fraction`)."""
        return self.mixing if self.mixing is not None else MixedBatches(self.replay_fraction)

    @property
    def tables(self) -> Tuple[str, ...]:
        """The tables every written sequence goes into."""
        return self.batch_mixing.tables(self.batch_sequences)

    @property
    def transitions_per_batch(self) -> int:
        """Transitions one learner step learns from (what a benchmark counts)."""
        return self.batch_sequences * self.learned_steps


# The key of a prioritized learner's per-row priorities in its step's result.
PRIORITIES = priorities.PRIORITIES


# The phase of a learner whose step never changes (`Learner.phase`).
LEARN = 'learn'


class Learner(tf.Module):
    """What the wiring uses of a learner, checkpointed whole. Every learner subclasses
    it through `agents.learner_base.LearnerBase`, which implements `step`, `pretrain`
    and `phase` from the extras the config declares (`agents.extras`) and the
    learner's own `learn`."""
    core: ActorCriticCore  # the acting core it trains: published, evaluated, exported
    num_steps: tf.Variable  # int64 learner steps taken (part of the checkpoint)

    def step(self, batch: Any) -> Dict[str, tf.Tensor]:
        """One update on a `replay.dataset.Batch`; scalar metrics by name (and, under
        prioritized sampling, `PRIORITIES`: the rows' new priorities `[B]`)."""
        raise NotImplementedError(f'{type(self).__name__} has no step')

    def set_progress(self, fraction: float) -> None:
        """`fraction` of the env-step budget is spent (learning-rate schedules)."""

    def pretrain(self) -> Optional[float]:
        """Updates before any actor acts (behavioural cloning on demonstrations), called
        once the checkpoint, if any, is restored; the last loss, or None when nothing
        was due (the default: no pre-training)."""
        return None

    def phase(self) -> str:
        """The phase the next step is in, for a learner whose step changes with its
        progress (critic pre-training, `agents.extras`). The wiring asks before each
        step and compiles `step` once per phase, so the step may branch on it in
        Python. Here: always `LEARN`."""
        return LEARN

    def final_policy(self) -> Optional[ContextManager[None]]:
        """A block in which the core holds the weights that evaluations (scheduled and
        final) and the export use when they are not the learned ones (a slow average of
        them, `agents.policy_average`); None (the default): the core's own."""
        return None


class Agent(abc.ABC):
    """One learning algorithm, as the wiring sees it (see the module docstring)."""

    name: str  # the `--agent` value
    config_class: type  # frozen dataclass built with `agents.configs`
    squash_actions: bool = False  # tanh-squashed continuous actions in [-1, 1]
    run_defaults: Mapping[str, Any] = {}  # RunOptions fields this agent defaults differently

    @abc.abstractmethod
    def data_plan(self, config: Any) -> DataPlan:
        """The agent's tables, sequences and batches for `config`."""

    @abc.abstractmethod
    def build_core(self, observation_space: Any, action_space: ActionSpace,
                   config: Any) -> ActorCriticCore:
        """The acting core (variables may still be unbuilt: Sonnet builds lazily).

        Raises `networks.distributions.UnsupportedSpaceError` (one line) for
        spaces the agent cannot handle.
        """

    @abc.abstractmethod
    def build_learner(self, make_core: Callable[[], ActorCriticCore], action_space: ActionSpace,
                      config: Any) -> Learner:
        """The learner; `make_core()` gives a core with every variable built."""

    @abc.abstractmethod
    def metric_names(self, config: Any, action_space: ActionSpace) -> Tuple[str, ...]:
        """The keys of `Learner.step`'s result."""

    def reward_weights(self, config: Any) -> Optional[Tuple[float, ...]]:
        """Weights of a vector reward the agent learns per component; None: scalar rewards."""
        del config
        return None

    def demo_files(self, config: Any) -> Tuple[str, ...]:
        """Demonstration files (`replay.demos`) the learner reads; the wiring checks each
        against the environment's spaces before anything starts."""
        del config
        return ()

    def for_tasks(self, config: Any, num_tasks: int) -> Any:
        """`config` for a run over `num_tasks` tasks (1 outside a task sequence); a
        ValueError (one line) for settings that do not fit. Agents that keep one set
        of value statistics for all tasks leave it as it is."""
        del num_tasks
        return config

    def for_reward_size(self, config: Any, reward_size: int) -> Any:
        """`config` for an environment with `reward_size`-component rewards (0: scalar).

        Agents that learn scalar rewards only leave a scalar environment's config
        as it is and refuse vector rewards (ValueError, one line).
        """
        if reward_size:
            raise ValueError(f'{self.name} learns scalar rewards; this environment\'s rewards '
                             f'have {reward_size} components (--agent=sac learns them)')
        return config
