"""The config machinery: documented fields, checks, flat names, two shared sub-configs.

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
`run_config.json` create one. A field worth tuning declares its search space beside
its default (`field(3e-4, doc, search=LogUniform(1e-5, 1e-2))`, `agents.search`).
The network sub-config and the normalisation fields (torsos, memory, PopArt) are
`agents.network_config`'s; the extras' sub-configs are their own modules'
(`agents.extras`).
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

from reverb_agents.agents.search import Choice, LogUniform
from reverb_agents.replay.batches import REPLAY_EVICTIONS

LEARNING_RATE_SCHEDULES = ('linear', 'constant')
OPTIMIZERS = ('adam', 'rmsprop')
REPLAY_SAMPLERS = ('uniform', 'prioritized')


def field(default: Any, doc: str, search: Any = None) -> Any:
    """A config field with its one-line doc (the flag's help) and, where it is worth
    tuning, the range `reverb-agents tune` searches (`agents.search`)."""
    return dataclasses.field(default=default, metadata={'doc': doc, 'search': search})


def sub_config(factory) -> Any:
    """A sub-config field (`OptimizerConfig`, `ReplayConfig`) with the agent's defaults."""
    return dataclasses.field(default_factory=factory, metadata={'sub_config': True})


def doc(config_field: dataclasses.Field) -> str:
    """The field's doc, with its search space's range where it has one."""
    text = config_field.metadata.get('doc', '')
    space = config_field.metadata.get('search')
    return f'{text}; tuned over {space.describe()}' if space is not None else text


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
    learning_rate: float = field(1e-3, 'step size', search=LogUniform(1e-5, 1e-2))
    learning_rate_schedule: str = field(
        'linear', "'linear' (to 0 at the env-step budget, as IMPALA) or 'constant'")
    adam_beta1: float = field(0.9, 'Adam first-moment decay')
    adam_beta2: float = field(0.999, 'Adam second-moment decay')
    adam_epsilon: float = field(1e-8, 'Adam epsilon')
    rmsprop_decay: float = field(0.99, 'RMSProp decay of the mean square (IMPALA: 0.99)')
    rmsprop_momentum: float = field(0.0, 'RMSProp momentum (IMPALA: 0)')
    rmsprop_epsilon: float = field(0.1, 'RMSProp epsilon (IMPALA: 0.1; ChainerRL ACER: 4e-3)')
    rmsprop_centered: bool = field(False, 'RMSProp normalised by the variance, not the mean square')
    clip_grad_norm: Optional[float] = field(40.0, 'global-norm gradient clip; unset or 0 disables',
                                            search=Choice(0.5, 5.0, 40.0))

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
