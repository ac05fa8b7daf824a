"""What every agent config shares: documented fields, checks, two sub-configs.

An agent's config is one frozen dataclass. Each field is declared with
`field(default, doc)`: the one-line doc becomes the help of the absl flag of
the same name (`launch/command_line/config_flags.py`), so defaults and docs live in the
config only. Checks go in `__post_init__` through `require`, whose message
says which value is wrong and why.

Two sub-configs give the fields every agent has one meaning everywhere:

- `OptimizerConfig` (`config.optimizer`): the optimiser (Adam or RMSProp),
  its step size and schedule, its moments and epsilon, and the global-norm
  gradient clip;
- `ReplayConfig` (`config.replay`): the sizes of the `queue` and `replay`
  tables, how `replay` evicts and how it samples (uniform or prioritized,
  `agents.priorities`). Sizes count *sequences* (one environment's stored
  steps), whatever one item holds.

Their fields are flags with the same flat names (`--learning_rate`,
`--replay_size`); an agent sets its own defaults by giving its config a
default sub-config (`dataclasses.field(default_factory=...)`).
`from_flat` builds a config from flat names, which is how flags, tests and
`run_config.json` create one.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

from reverb_agents.networks import user_spec  # pure Python, no TensorFlow
from reverb_agents.replay.batches import REPLAY_EVICTIONS

LEARNING_RATE_SCHEDULES = ('linear', 'constant')
OPTIMIZERS = ('adam', 'rmsprop')
REPLAY_SAMPLERS = ('uniform', 'prioritized')
TORSOS = ('auto', 'mlp', 'nature_cnn', 'impala_resnet', 'simple', 'minatar', 'nature', 'impala')


PREV_REWARD_INPUTS = ('transformed', 'raw')
VALUE_NORMALIZATIONS = ('popart', 'none')
VALUE_NORMALIZATION_DOC = ("'popart': value heads learned in normalised units with running "
                           "target statistics (networks/popart.py), so no reward scale needs "
                           "tuning; 'none': in the reward's units (the seeds)")
NUM_TASKS_DOC = ("the value outputs, each with its own PopArt statistics: 0 = one per task of "
                 "--tasks with PopArt (its multi-task form), else one; 1 = one for all tasks")
POPART_STEP_DOC = "PopArt's statistics step size (beta; exact averages for the first 1/beta steps)"


NORMALIZE_DOC = ('standardise vector observations with running statistics (ML-Agents); '
                 'other observations (images, dicts) are left as they are')


def normalizes(normalize: bool, observation_space: Any) -> bool:
    """Whether a core standardises `observation_space` under `normalize`: a vector Box
    only (images have their own scale; a dict's leaves are not standardised)."""
    import gymnasium as gym  # configs stay importable without gymnasium's import cost
    return bool(normalize) and isinstance(observation_space, gym.spaces.Box) \
        and len(observation_space.shape) == 1


def normalization_options(config: Any, observation_space: Any) -> Dict[str, Any]:
    """`ActorCriticCore`'s keyword arguments for a config's `normalize`,
    `value_normalization`, `popart_step_size` and `num_tasks` (CLEAR's and ACER's)."""
    return dict(normalize_observations=normalizes(config.normalize, observation_space),
                value_normalization=config.value_normalization == 'popart',
                popart_step_size=config.popart_step_size, num_tasks=max(1, config.num_tasks))


def check_value_normalization(config: Any) -> None:
    """`value_normalization` is a known mode, `popart_step_size` in (0, 1] and
    `num_tasks` >= 0."""
    require_choice('value_normalization', config.value_normalization, VALUE_NORMALIZATIONS)
    require(0.0 < config.popart_step_size <= 1.0,
            f'popart_step_size must be in (0, 1], got {config.popart_step_size}')
    require(config.num_tasks >= 0, f'num_tasks must be >= 0, got {config.num_tasks}')


def for_tasks(config: Any, num_tasks: int) -> Any:
    """A config with `num_tasks` for a run over `num_tasks` tasks (CLEAR's and ACER's
    `Agent.for_tasks`): 0 becomes one per task with PopArt, else 1; 1 and the run's
    number stay; any other value is a ValueError (one line)."""
    if config.num_tasks == 0:  # per task where PopArt has statistics to keep apart
        return replace(config, num_tasks=num_tasks
                       if config.value_normalization == 'popart' else 1)
    if config.num_tasks not in (1, num_tasks):
        raise ValueError(f'num_tasks={config.num_tasks}: give 0 (one value output per '
                         f'task), 1 (one for all) or the number of tasks ({num_tasks})')
    return config
TORSO_DOC = ("'auto' (by the observation: mlp, minatar under 36x36 images, else nature_cnn), "
             "'mlp', 'nature_cnn' ('nature'), 'impala_resnet' ('impala'), 'simple' (ML-Agents) "
             "or 'minatar' (the MinAtar paper's conv 16 3x3)")
PREV_REWARD_DOC = ("the core's previous-reward input: 'transformed' (as the learner sees it, "
                   "as the seeds) or 'raw'")


def reward_input(mode: str, scaling: float,
                 clipping: str = 'none') -> Optional[Tuple[float, str]]:
    """The core's `reward_transform` for a `prev_reward_input` mode (None: raw)."""
    return None if mode == 'raw' else (scaling, clipping)


def field(default: Any, doc: str) -> Any:
    """A config field with its one-line doc (the flag's help)."""
    return dataclasses.field(default=default, metadata={'doc': doc})


def sub_config(factory) -> Any:
    """A sub-config field (`OptimizerConfig`, `ReplayConfig`) with the agent's defaults."""
    return dataclasses.field(default_factory=factory, metadata={'sub_config': True})


def doc(config_field: dataclasses.Field) -> str:
    return config_field.metadata.get('doc', '')


def require(ok: bool, message: str) -> None:
    """Raises `ValueError(message)` unless `ok` (a config check)."""
    if not ok:
        raise ValueError(message)


def require_choice(name: str, value: Any, choices: Tuple[Any, ...]) -> None:
    require(value in choices, f'{name} must be one of {choices}, got {value!r}')


def require_positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        require(value > 0, f'{name} must be positive, got {value}')


def require_fraction(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        require(0.0 <= value <= 1.0, f'{name} must be in [0, 1], got {value}')


def require_sizes(name: str, sizes: Tuple[int, ...]) -> None:
    """Layer sizes: a tuple of positive ints."""
    require(all(isinstance(s, int) and s > 0 for s in sizes),
            f'{name} must be positive layer sizes, got {sizes}')


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    optimizer: str = field('adam', "'adam' or 'rmsprop' (IMPALA's and ChainerRL ACER's)")
    learning_rate: float = field(1e-3, 'step size')
    learning_rate_schedule: str = field(
        'linear', "'linear' (to 0 at the env-step budget, as IMPALA) or 'constant'")
    adam_beta1: float = field(0.9, 'Adam first-moment decay')
    adam_beta2: float = field(0.999, 'Adam second-moment decay')
    adam_epsilon: float = field(1e-8, 'Adam epsilon')
    rmsprop_decay: float = field(0.99, 'RMSProp decay of the mean square (IMPALA: 0.99)')
    rmsprop_momentum: float = field(0.0, 'RMSProp momentum (IMPALA: 0)')
    rmsprop_epsilon: float = field(0.1, 'RMSProp epsilon (IMPALA: 0.1; ChainerRL ACER: 4e-3)')
    rmsprop_centered: bool = field(False, 'RMSProp normalised by the variance, not the mean square')
    clip_grad_norm: Optional[float] = field(40.0, 'global-norm gradient clip; unset or 0 disables')

    def __post_init__(self):
        require_choice('optimizer', self.optimizer, OPTIMIZERS)
        require_positive(self, 'learning_rate', 'adam_epsilon', 'rmsprop_epsilon')
        require_choice('learning_rate_schedule', self.learning_rate_schedule,
                       LEARNING_RATE_SCHEDULES)
        for name in ('adam_beta1', 'adam_beta2', 'rmsprop_decay', 'rmsprop_momentum'):
            value = getattr(self, name)
            require(0.0 <= value < 1.0, f'{name} must be in [0, 1) (a decay rate), got {value}')
        require(self.clip_grad_norm is None or self.clip_grad_norm >= 0,
                f'clip_grad_norm must be >= 0 (0 disables), got {self.clip_grad_norm}')

    def annealed(self, learning_rate: float, fraction: float) -> float:
        """`learning_rate` after `fraction` of the env-step budget under the schedule."""
        if self.learning_rate_schedule == 'linear':
            return learning_rate * max(0.0, 1.0 - fraction)
        return learning_rate


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    replay_size: int = field(5000, 'sequences the replay table keeps before it evicts')
    replay_eviction: str = field(
        'fifo', "'fifo' or 'reservoir' (random discard: keeps old tasks' data, as CLEAR)")
    queue_size: int = field(64, 'fresh sequences buffered before actors wait for the learner')
    replay_sampler: str = field(
        'uniform', "'uniform' or 'prioritized' (by TD error, Schaul et al.; agents.priorities)")
    priority_exponent: float = field(0.6, 'prioritized: alpha, P(i) ~ priority^alpha')
    importance_sampling_exponent: float = field(
        0.4, 'prioritized: beta at the start, annealed linearly to 1')
    importance_sampling_anneal_steps: int = field(
        100_000, 'prioritized: learner steps over which beta reaches 1 (0: 1 from the start)')
    priority_eta: float = field(
        0.9, "prioritized: a sequence's priority, eta max|delta| + (1 - eta) mean|delta| (R2D2)")

    def __post_init__(self):
        require_positive(self, 'replay_size', 'queue_size')
        require_choice('replay_eviction', self.replay_eviction, REPLAY_EVICTIONS)
        require_choice('replay_sampler', self.replay_sampler, REPLAY_SAMPLERS)
        require(self.priority_exponent >= 0,
                f'priority_exponent must be >= 0, got {self.priority_exponent}')
        require_fraction(self, 'importance_sampling_exponent', 'priority_eta')
        require(self.importance_sampling_anneal_steps >= 0,
                f'importance_sampling_anneal_steps must be >= 0, got '
                f'{self.importance_sampling_anneal_steps}')
        require(not (self.prioritized and self.replay_eviction == 'reservoir'),
                "replay_eviction='reservoir' evicts by random priorities, which prioritized "
                "sampling would read as TD errors; use one or the other")

    @property
    def prioritized(self) -> bool:
        return self.replay_sampler == 'prioritized'

    @property
    def sampling_exponent(self) -> Optional[float]:
        """`DataPlan.priority_exponent`: alpha when prioritized, else None (uniform)."""
        return self.priority_exponent if self.prioritized else None

    def metric_names(self) -> Tuple[str, ...]:
        """What a learner step adds under prioritized sampling."""
        return PRIORITY_METRICS if self.prioritized else ()


PRIORITY_METRICS = ('replay/priority_mean', 'replay/is_weight_mean')


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The torso and the memory: built-in by name, or of the user's own as
    `MODULE:FUNCTION` (`networks.user`, docs/networks.md). The sizes of the built-in
    parts (`hidden_sizes`, `lstm_size`) stay in each agent's config, whose defaults
    differ."""
    torso: str = field('auto', TORSO_DOC + '; or MODULE:FUNCTION, a factory '
                       'f(observation_space, **torso_kwargs) of a Keras layer / Sonnet module')
    torso_kwargs: str = field('', 'key=value,... passed to a --torso=MODULE:FUNCTION factory')
    memory: str = field('', "'' (the LSTM of --lstm_size, or none) or MODULE:FUNCTION, a "
                        'factory f(**memory_kwargs) of a Keras RNN cell or an snt.RNNCore, in '
                        "the LSTM's place")
    memory_kwargs: str = field('', 'key=value,... passed to a --memory=MODULE:FUNCTION factory')
    memory_skip: bool = field(False, "the torso's features also go around the memory to the "
                              'heads (concatenated with its output)')

    def __post_init__(self):
        if user_spec.is_user_network(self.torso):
            user_spec.check_spec('torso', self.torso)
        else:
            require_choice('torso', self.torso, TORSOS)
        if self.memory:
            user_spec.check_spec('memory', self.memory)
        user_spec.parse_kwargs('torso_kwargs', self.torso_kwargs)
        user_spec.parse_kwargs('memory_kwargs', self.memory_kwargs)
        require(not self.torso_kwargs or user_spec.is_user_network(self.torso),
                f'--torso_kwargs={self.torso_kwargs} is for a torso of your own '
                f'(--torso=MODULE:FUNCTION), not the built-in {self.torso!r}')
        require(not self.memory_kwargs or bool(self.memory),
                f'--memory_kwargs={self.memory_kwargs} is for a memory of your own '
                f'(--memory=MODULE:FUNCTION)')

    @property
    def users_own(self) -> bool:
        """Whether the torso or the memory is the user's own (`MODULE:FUNCTION`)."""
        return user_spec.is_user_network(self.torso) or bool(self.memory)

    def core_options(self) -> Dict[str, str]:
        """`ActorCriticCore`'s keyword arguments for the torso and the memory."""
        return dict(torso=self.torso, torso_kwargs=self.torso_kwargs, memory=self.memory,
                    memory_kwargs=self.memory_kwargs, memory_skip=self.memory_skip)


def network_with_skip() -> NetworkConfig:
    """The network sub-config of CLEAR and ACER: the torso's features also go around
    the memory to the heads (`memory_skip`)."""
    return NetworkConfig(memory_skip=True)


def check_memory(config: Any) -> None:
    """A user's memory takes the LSTM's place: `lstm_size` must stay at 0 or at the
    agent's default (then unused, `lstm_units`)."""
    default = type(config).__dataclass_fields__['lstm_size'].default
    require(not (config.network.memory and config.lstm_size not in (0, default)),
            f'--memory={config.network.memory} takes the LSTM\'s place: leave --lstm_size at '
            f'0 (got {config.lstm_size})')


def lstm_units(config: Any) -> int:
    """The core's LSTM units: `lstm_size`, or 0 where a user's memory takes its place."""
    return 0 if config.network.memory else config.lstm_size


def recurrent(config: Any) -> bool:
    """Whether an agent config's core has a memory (an LSTM or the user's own)."""
    return config.lstm_size > 0 or bool(config.network.memory)


def flat_fields(config_class: type) -> Dict[str, Tuple[dataclasses.Field, Optional[str]]]:
    """Every flat name of a config -> (its field, the sub-config attribute or None)."""
    out = {}
    for f in dataclasses.fields(config_class):
        if f.metadata.get('sub_config'):
            for sub in dataclasses.fields(f.type):
                out[sub.name] = (sub, f.name)
        else:
            out[f.name] = (f, None)
    return out


def flat_defaults(config_class: type) -> Dict[str, Any]:
    """Every flat name of a config -> its default in that config."""
    return flatten(config_class())


def flatten(config: Any) -> Dict[str, Any]:
    """A config as {flat name: value} (sub-configs' fields inlined)."""
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.metadata.get('sub_config'):
            out.update({s.name: getattr(value, s.name) for s in dataclasses.fields(value)})
        else:
            out[f.name] = value
    return out


def from_flat(config_class: type, values: Mapping[str, Any]) -> Any:
    """`config_class` with `values` ({flat name: value}) over its defaults.

    Lists become tuples (JSON has no tuples). Raises ValueError naming any
    name the config does not have, or a value its checks refuse.
    """
    names = flat_fields(config_class)
    unknown = sorted(set(values) - set(names))
    require(not unknown, f'{config_class.__name__} has no field(s) {", ".join(unknown)}')
    top, subs = {}, {}
    for name, value in values.items():
        value = tuple(value) if isinstance(value, list) else value
        owner = names[name][1]
        if owner is None:
            top[name] = value
        else:
            subs.setdefault(owner, {})[name] = value
    defaults = {f.name: f.default_factory() for f in dataclasses.fields(config_class)
                if f.metadata.get('sub_config')}
    for owner, overrides in subs.items():
        top[owner] = dataclasses.replace(defaults[owner], **overrides)
    return config_class(**top)


def replace(config: Any, **values: Any) -> Any:
    """A copy of `config` with flat-named `values` changed."""
    return from_flat(type(config), {**flatten(config), **values})


def field_owners(config_classes: Mapping[str, type]) -> Dict[str, Tuple[str, ...]]:
    """Flat field name -> the names of the agents whose configs have it."""
    owners: Dict[str, Tuple[str, ...]] = {}
    for agent, config_class in config_classes.items():
        for name in flat_fields(config_class):
            owners[name] = owners.get(name, ()) + (agent,)
    return owners



def from_nested(config_class: type, values: Mapping[str, Any]) -> Any:
    """`config_class` from `dataclasses.asdict` output (sub-configs as dicts)."""
    flat: Dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, dict):
            flat.update(value)
        else:
            flat[name] = value
    return from_flat(config_class, flat)
