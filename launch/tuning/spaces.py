"""A study's search space: the agent's declared spaces, narrowed or replaced, checked.

Every config field declared with `search=` (`agents.search`) is in the agent's
space, and so is every run option `launch.runs.options.SEARCH` gives one
(`num_envs`); `--search=a,b` keeps those fields; `--space=FILE` (JSON, or YAML where
PyYAML is installed) replaces the space by the file's. A field the command line
fixes (`--learning_rate=...` on `tune`) leaves the space. Each value a space can
give is checked against the agent's config before any trial starts: a range the
config refuses, or one whose kind is not the field's, is one error line.
"""

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, Mapping, Sequence

from reverb_agents.agents import configs, search
from reverb_agents.launch.runs import options as options_lib


class SpaceError(ValueError):
    """A search space this agent cannot use (one line)."""


def declared(config_class: type) -> Dict[str, search.Space]:
    """The run options with a space (`RunOptions`' `SEARCH`), then every flat field of
    `config_class` with a declared space -> that space."""
    fields = configs.flat_fields(config_class).items()
    return {**options_lib.SEARCH, **{name: f.metadata['search'] for name, (f, _) in fields
                                     if f.metadata.get('search') is not None}}


def read_file(path: str) -> Dict[str, search.Space]:
    """The spaces of a `--space` file (`agents.search`'s forms), or SpaceError."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as error:
        raise SpaceError(f'--space={path}: {error.strerror}') from None
    try:
        if os.path.splitext(path)[1].lower() in ('.yaml', '.yml'):
            import yaml  # PyYAML: installed with Optuna's dependencies
            entries = yaml.safe_load(text)
        else:
            entries = json.loads(text)
    except Exception as error:  # json's and yaml's own errors: the first line says where
        raise SpaceError(f'--space={path}: not readable as '
                         f'{"YAML" if path.endswith(("yaml", "yml")) else "JSON"}: '
                         f'{str(error).splitlines()[0]}') from None
    if not isinstance(entries, Mapping) or not entries:
        raise SpaceError(f'--space={path}: expected an object {{field: space, ...}}')
    try:
        return {str(name): search.from_spec(str(name), spec) for name, spec in entries.items()}
    except search.SpaceError as error:
        raise SpaceError(f'--space={path}: {error}') from None


def choose(config_class: type, agent: str, names: Sequence[str] = (),
           space_file: str = '', fixed: Iterable[str] = (), config: Any = None
           ) -> Dict[str, search.Space]:
    """The study's space: the file's (`space_file`) or the declared one, narrowed to
    `names` when given, without the `fixed` fields; every field checked (`check`,
    against `config`, the command's own, when given)."""
    fields = {**options_lib.SEARCH, **configs.flat_fields(config_class)}
    space = read_file(space_file) if space_file else declared(config_class)
    if names:
        unknown = [n for n in names if n not in fields]
        if unknown:
            raise SpaceError(f'--search: {", ".join(unknown)} is not a field of {agent}')
        missing = [n for n in names if n not in space]
        if missing:
            raise SpaceError(f'--search: {", ".join(missing)} has no search space '
                             f'(declare one with --space=FILE)')
        space = {n: space[n] for n in names}
    space = {n: s for n, s in space.items() if n not in set(fixed)}
    if not space:
        raise SpaceError(f'nothing to tune: {agent} has no field with a search space left '
                         f'(--search, --space, or the fields fixed on the command line)')
    check(config_class, agent, space, config)
    return space


def candidates(space: search.Space) -> Sequence[Any]:
    """The values a check tries: a choice's every value, a range's two ends."""
    if isinstance(space, search.Choice):
        return space.values
    return (space.low, space.high)


def check(config_class: type, agent: str, space: Mapping[str, search.Space],
          config: Any = None) -> None:
    """Raises SpaceError for a field `agent`'s config lacks, a space that cannot hold
    the field's default's kind, or a value the config refuses (`config` with that one
    value changed: the command's own, or the defaults)."""
    fields = configs.flat_fields(config_class)
    defaults = configs.flat_defaults(config_class)
    for name, field_space in space.items():
        if name in options_lib.SEARCH:
            _check_run_option(name, field_space)
            continue
        if name not in fields:
            raise SpaceError(f'{name} is not a field of {agent}')
        try:
            field_space.check_type(name, defaults[name])
        except search.SpaceError as error:
            raise SpaceError(str(error)) from None
        for value in candidates(field_space):
            try:
                if config is None:
                    configs.from_flat(config_class, {name: value})
                else:
                    configs.replace(config, **{name: value})
            except (ValueError, TypeError) as error:
                raise SpaceError(f'{name}: {field_space.describe()} reaches {value!r}, which '
                                 f'{agent} refuses: {error}') from None


def _check_run_option(name: str, space: search.Space) -> None:
    """A run option's space: of the option's kind, every value one `RunOptions` takes."""
    default = getattr(options_lib.RunOptions(), name)
    try:
        space.check_type(name, default)
        for value in candidates(space):
            dataclasses.replace(options_lib.RunOptions(), **{name: value})
    except (search.SpaceError, ValueError, TypeError) as error:
        raise SpaceError(f'{name}: {error}') from None


def flag(name: str, value: Any) -> str:
    """`--name=value` as the command line takes it (booleans true/false, tuples a,b)."""
    if isinstance(value, bool):
        text = 'true' if value else 'false'
    elif isinstance(value, (tuple, list)):
        text = ','.join(str(v) for v in value)
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return f'--{name}={text}'


def describe(space: Mapping[str, search.Space]) -> Dict[str, str]:
    return {name: s.describe() for name, s in space.items()}

