"""absl flags from the agents' config dataclasses, so defaults live in one place.

Every field of every registered config becomes a flag of the same name whose
default is None ("the agent's default"); the help text is the field's one-line
comment. `config_from_flags` builds the chosen agent's config from the flags
that were set.
"""

import dataclasses
import inspect
import re
import typing
from typing import Any, Dict, Iterable

from absl import flags


def field_docs(config_class: type) -> Dict[str, str]:
    """`name: type = default  # doc` lines of the class source -> {name: doc}."""
    docs = {}
    for line in inspect.getsource(config_class).splitlines():
        match = re.match(r'\s+(\w+)\s*:[^=]+=.*#\s*(.*)$', line)
        if match:
            docs[match.group(1)] = match.group(2)
    return docs


def _base_type(field: dataclasses.Field) -> Any:
    """The field's type without `Optional`."""
    hint = field.type if not isinstance(field.type, str) else eval(field.type, vars(typing))
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args and typing.get_origin(hint) is typing.Union else hint


def _kind(field: dataclasses.Field) -> str:
    base = _base_type(field)
    if base in (tuple, list) or typing.get_origin(base) in (tuple, list):
        return 'list'
    return {bool: 'bool', int: 'integer', float: 'float', str: 'string'}[base]


def _element_type(field: dataclasses.Field) -> type:
    """A list field's element type: `Tuple[float, ...]` says float; bare `tuple` means int."""
    args = typing.get_args(_base_type(field))
    return args[0] if args else int


def define_flags(config_classes: Iterable[type], flag_values=flags.FLAGS) -> None:
    seen = {}
    for config_class in config_classes:
        docs = field_docs(config_class)
        for field in dataclasses.fields(config_class):
            default = field.default
            entry = f'{config_class.__name__}: {default!r}'
            if field.name in seen:
                seen[field.name][1].append(entry)
                continue
            seen[field.name] = (field, [entry], docs.get(field.name, ''))
    for name, (field, defaults, doc) in seen.items():
        help_text = f'{doc} (default {"; ".join(defaults)})'
        kind = _kind(field)
        if kind == 'list':
            flags.DEFINE_list(name, None, help_text, flag_values=flag_values)
        else:
            getattr(flags, f'DEFINE_{kind}')(name, None, help_text, flag_values=flag_values)


def config_from_flags(config_class: type, flag_values=flags.FLAGS) -> Any:
    """The config with every flag the user set; raises ValueError on bad values."""
    overrides = {}
    for field in dataclasses.fields(config_class):
        value = flag_values[field.name].value
        if value is None:
            continue
        if _kind(field) == 'list':
            element = _element_type(field)
            try:
                value = tuple(element(v) for v in value)
            except ValueError:
                raise ValueError(f'--{field.name} takes comma-separated {element.__name__}s, '
                                 f'got {",".join(value)!r}') from None
        overrides[field.name] = value
    return config_class(**overrides)
