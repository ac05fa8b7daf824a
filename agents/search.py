"""Search spaces: the range a config field is tuned over, declared beside its default.

`configs.field(default, doc, search=LogUniform(1e-5, 1e-2))` gives a field a space;
`reverb-agents tune` (`launch/tuning/`) samples every field that has one (or those
`--search` names, or a `--space` file's), and `--help` shows each range. The spaces
are plain values with no tuner in them: `suggest(trial, name)` asks any object with
Optuna's `suggest_float` / `suggest_int` / `suggest_categorical` for a value.

Kinds: `Uniform(low, high)`, `LogUniform(low, high)` (floats), `IntRange(low, high,
log=False)`, `Choice(*values)` (any values a flag takes: numbers, strings, booleans,
tuples of ints for a layer list). A `--space` file (JSON or YAML) holds
`{field: spec}` with spec `{"uniform": [low, high]}`, `{"log_uniform": [low, high]}`,
`{"int": [low, high]}` (`"log_int"` for a log scale) or `{"choice": [v1, v2, ...]}`.
"""

import dataclasses
import math
from typing import Any, Mapping, Tuple


class SpaceError(ValueError):
    """A search space that cannot hold its field's values (one line)."""


@dataclasses.dataclass(frozen=True)
class Uniform:
    low: float
    high: float

    def __post_init__(self):
        _check_range(self, self.low, self.high)

    def suggest(self, trial: Any, name: str) -> float:
        return trial.suggest_float(name, self.low, self.high)

    def describe(self) -> str:
        return f'uniform {self.low:g}..{self.high:g}'

    def check_type(self, name: str, default: Any) -> None:
        _require_number(self, name, default, float)


@dataclasses.dataclass(frozen=True)
class LogUniform(Uniform):
    def __post_init__(self):
        super().__post_init__()
        if self.low <= 0:
            raise SpaceError(f'a log-uniform range needs low > 0, got {self.low}')

    def suggest(self, trial: Any, name: str) -> float:
        return trial.suggest_float(name, self.low, self.high, log=True)

    def describe(self) -> str:
        return f'log-uniform {self.low:g}..{self.high:g}'


@dataclasses.dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    log: bool = False

    def __post_init__(self):
        if not all(isinstance(v, int) and not isinstance(v, bool)
                   for v in (self.low, self.high)):
            raise SpaceError(f'an int range needs int bounds, got {self.low!r}, {self.high!r}')
        _check_range(self, self.low, self.high)
        if self.log and self.low <= 0:
            raise SpaceError(f'a log int range needs low > 0, got {self.low}')

    def suggest(self, trial: Any, name: str) -> int:
        return trial.suggest_int(name, self.low, self.high, log=self.log)

    def describe(self) -> str:
        return f'{"log " if self.log else ""}int {self.low}..{self.high}'

    def check_type(self, name: str, default: Any) -> None:
        _require_number(self, name, default, int)


@dataclasses.dataclass(frozen=True)
class Choice:
    values: Tuple[Any, ...]

    def __init__(self, *values: Any):
        if not values:
            raise SpaceError('a choice needs at least one value')
        object.__setattr__(self, 'values', tuple(
            tuple(v) if isinstance(v, list) else v for v in values))

    def suggest(self, trial: Any, name: str) -> Any:
        # Optuna stores categorical choices as JSON scalars: a tuple goes as its string.
        return self.value_of(trial.suggest_categorical(name, [key(v) for v in self.values]))

    def value_of(self, stored: Any) -> Any:
        """The value Optuna stored as `stored` (`key`'s form: a tuple as its text)."""
        return self.values[[key(v) for v in self.values].index(stored)]

    def describe(self) -> str:
        return 'one of ' + ' / '.join(str(key(v)) for v in self.values)

    def check_type(self, name: str, default: Any) -> None:
        for value in self.values:
            if not _same_kind(value, default):
                raise SpaceError(f'{name}: the choice {value!r} is not of the type of its '
                                 f'default {default!r}')


Space = Any  # Uniform | LogUniform | IntRange | Choice


def key(value: Any) -> Any:
    """A choice as Optuna stores it: scalars as they are, a tuple as 'a,b'."""
    if isinstance(value, tuple):
        return ','.join(str(v) for v in value)
    return value


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    if isinstance(default, tuple):
        return isinstance(value, tuple) and all(isinstance(v, type(d)) for v, d in zip(
            value, default)) if default else isinstance(value, tuple)
    return default is None or isinstance(value, type(default))


def _check_range(space: Any, low: float, high: float) -> None:
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float))
            and math.isfinite(low) and math.isfinite(high) and low < high):
        raise SpaceError(f'{type(space).__name__} needs finite low < high, got {low!r}, {high!r}')


def _require_number(space: Any, name: str, default: Any, kind: type) -> None:
    """A float range needs a float field (an unset Optional one too), an int range an
    int field."""
    ok = (default is None and kind is float) or (
        isinstance(default, kind) and not isinstance(default, bool))
    if not ok:
        raise SpaceError(f'{name}: {space.describe()} cannot hold its default {default!r} '
                         f'({type(default).__name__})')


def from_spec(name: str, spec: Any) -> Space:
    """A space from a `--space` file's entry (the module doc's forms); SpaceError naming
    `name` for anything else."""
    kinds = {'uniform': Uniform, 'log_uniform': LogUniform,
             'int': lambda low, high: IntRange(low, high),
             'log_int': lambda low, high: IntRange(low, high, log=True)}
    if isinstance(spec, Mapping) and len(spec) == 1:
        ((kind, args),) = spec.items()
        try:
            if kind == 'choice' and isinstance(args, list):
                return Choice(*args)
            if kind in kinds and isinstance(args, list) and len(args) == 2:
                return kinds[kind](*args)
        except (SpaceError, TypeError) as error:
            raise SpaceError(f'{name}: {error}') from None
    raise SpaceError(f'{name}: a space is one of {{"uniform": [low, high]}}, '
                     f'{{"log_uniform": [low, high]}}, {{"int": [low, high]}}, '
                     f'{{"log_int": [low, high]}} or {{"choice": [values]}}; got {spec!r}')


# Ranges several agents' fields share (RL Zoo's for the same hyperparameters, where it
# has one); an agent's field names the one it uses.
DISCOUNTS = Choice(0.9, 0.95, 0.98, 0.99, 0.995, 0.999)
ENTROPY_COSTS = LogUniform(1e-5, 0.1)
LAMBDAS = Choice(0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0)
HIDDEN_SIZES = Choice((64, 64), (128, 128), (256, 256))
LSTM_SIZES = Choice(0, 64, 128)
UNROLL_LENGTHS = Choice(5, 10, 20, 40)
VALUE_COSTS = Uniform(0.1, 1.0)
