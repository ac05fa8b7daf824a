"""absl flags from the agents' config dataclasses, so defaults live in one place.

Every field of every registered config (sub-config fields under their flat
names) becomes a flag of the same name whose default is None ("the agent's
default"); the help text is the field's doc (`agents.configs.field`) and each
agent's default, each agent's own doc where the agents' docs differ
(`launch/command_line/help.py` shows one agent's fields alone). `config_from_values` builds
the chosen agent's config from the values that were set (flags or the Python
API's keywords), and refuses a field that only other agents have.
"""

import dataclasses
import typing
from typing import Any, Dict, List, Mapping, Tuple

from absl import flags

from reverb_agents.agents import configs


def _base_type(hint: Any) -> Any:
    """The type without `Optional`."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args and typing.get_origin(hint) is typing.Union else hint


def _kind(hint: Any) -> str:
    base = _base_type(hint)
    if typing.get_origin(base) in (tuple, list):
        return 'list'
    return {bool: 'bool', int: 'integer', float: 'float', str: 'string'}[base]


def _element_type(hint: Any) -> type:
    """A list field's element type: `Tuple[float, ...]` -> float."""
    return typing.get_args(_base_type(hint))[0]


def _hints(config_class: type) -> Dict[str, Any]:
    """Flat field name -> its type hint (sub-config fields included)."""
    hints = typing.get_type_hints(config_class)
    flat = {}
    for field in dataclasses.fields(config_class):
        if field.metadata.get('sub_config'):
            flat.update(typing.get_type_hints(hints[field.name]))
        else:
            flat[field.name] = hints[field.name]
    return flat


def shared_help(docs: Mapping[str, List[str]]) -> str:
    """One flag's help from `{doc: ['agent: default', ...]}`: the doc and every agent's
    default; agents whose docs differ (`batch_size` counts sequences in CLEAR, transitions
    in SAC) each with their own."""
    if len(docs) == 1:
        ((doc, defaults),) = docs.items()
        return f'{doc} (default {"; ".join(defaults)})'
    return ' | '.join(f'{doc} ({"; ".join(defaults)})' for doc, defaults in docs.items())


def define_flags(agent_configs: Mapping[str, type], flag_values=flags.FLAGS) -> None:
    """One flag per flat config field of every agent (`{agent name: config class}`).

    Raises TypeError when two agents give one name different types: a flag
    has one type.
    """
    seen: Dict[str, Tuple[Any, Dict[str, List[str]]]] = {}  # name -> (hint, {doc: entries})
    for agent, config_class in agent_configs.items():
        hints = _hints(config_class)
        defaults = configs.flat_defaults(config_class)
        for name, (field, _) in configs.flat_fields(config_class).items():
            entry = f'{agent}: {defaults[name]!r}'
            if name in seen and seen[name][0] != hints[name]:
                raise TypeError(f'config field {name!r} has type {seen[name][0]} in one '
                                f'agent and {hints[name]} in {agent}; one flag, one type')
            seen.setdefault(name, (hints[name], {}))[1].setdefault(
                configs.doc(field), []).append(entry)
    for name, (hint, docs) in seen.items():
        help_text = shared_help(docs)
        kind = _kind(hint)
        if kind == 'list':
            flags.DEFINE_list(name, None, help_text, flag_values=flag_values)
        else:
            getattr(flags, f'DEFINE_{kind}')(name, None, help_text, flag_values=flag_values)


def _elements(name: str, value: Any, element: type) -> Tuple[Any, ...]:
    """A list field's value as a tuple of `element`s: strings (the command line's) are
    parsed; other values must be of the type already (an int is a float)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f'{name} takes a tuple of {element.__name__}s, got {value!r}')
    if all(isinstance(v, str) for v in value) and element is not str:
        try:
            return tuple(element(v) for v in value)
        except ValueError:
            raise ValueError(f'--{name} takes comma-separated {element.__name__}s, '
                             f'got {",".join(value)!r}') from None
    kinds = (int, float) if element is float else (element,)
    if not all(isinstance(v, kinds) and not isinstance(v, bool) for v in value):
        raise ValueError(f'{name} takes a tuple of {element.__name__}s, got {tuple(value)!r}')
    return tuple(element(v) for v in value)


def config_from_values(agent: str, agent_configs: Mapping[str, type],
                       values: Mapping[str, Any]) -> Any:
    """`agent`'s config with every field `values` sets (by flat name; None: the default).

    Raises ValueError (one line) for a field that belongs to other agents
    only, a list element of the wrong type, or a value the config refuses.
    """
    config_class = agent_configs[agent]
    hints = _hints(config_class)
    owners = configs.field_owners(agent_configs)
    overrides = {}
    for name, agents in sorted(owners.items()):
        value = values.get(name)
        if value is None:
            continue
        if agent not in agents:
            raise ValueError(f'--{name} is a flag of {" and ".join(agents)}, not of {agent}')
        if _kind(hints[name]) == 'list':
            value = _elements(name, value, _element_type(hints[name]))
        overrides[name] = value
    return configs.from_flat(config_class, overrides)


def config_from_flags(agent: str, agent_configs: Mapping[str, type],
                      flag_values=flags.FLAGS) -> Any:
    """`config_from_values` of the parsed flags."""
    return config_from_values(agent, agent_configs,
                              {name: flag_values[name].value for name in flag_values})
