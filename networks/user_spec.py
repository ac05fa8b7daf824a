"""How a network of the user's own is named in a config: `MODULE:FUNCTION` and its
keyword arguments, as text (no TensorFlow here: configs import this module).

- `MODULE:FUNCTION` names a factory importable in every process of a run (a dotted
  module on the Python path, as `--env=module:Id`); `FUNCTION` may be dotted
  (`module:Class.method`). Each role imports and calls it itself, so the name is
  what `run_config.json` records and what every launcher passes on.
- `<local>:NAME` names a factory the Python API was given that no other process
  can import (a lambda, a closure, a function of `__main__`, a layer object): it
  lives in this process's registry (`register_local`) and only in-process runs
  can use it; any other process refuses it with one line saying why.
- keyword arguments are `key=value,...`: each value a Python literal (`64`,
  `(64, 64)`, `'relu'`) or, failing that, the text itself (`activation=relu`);
  commas inside brackets or quotes do not split.
"""

import ast
import re
from typing import Any, Callable, Dict, Mapping, Union

LOCAL = '<local>'  # the module part of a factory that lives in this process only
_SPEC = re.compile(r'^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$')
_LOCAL_SPEC = re.compile(rf'^{re.escape(LOCAL)}:[\w.-]+$')
_KEY = re.compile(r'^[A-Za-z_]\w*$')
_LOCAL_FACTORIES: Dict[str, Callable[..., Any]] = {}


def is_user_network(name: str) -> bool:
    """True for `MODULE:FUNCTION` (or `<local>:NAME`), False for a built-in name."""
    return ':' in name


def is_local(name: str) -> bool:
    """True for a factory registered in this process only (`register_local`)."""
    return name.startswith(LOCAL + ':')


def check_spec(flag: str, name: str) -> None:
    """Raises ValueError (one line) unless `name` is `MODULE:FUNCTION` or `<local>:NAME`."""
    if not (_SPEC.match(name) or _LOCAL_SPEC.match(name)):
        raise ValueError(f'--{flag}={name}: expected MODULE:FUNCTION (a dotted module on the '
                         f'Python path and a function in it, e.g. my_nets:make_torso)')


def split_kwargs(text: str) -> list:
    """`'a=1,b=(2, 3)'` -> `['a=1', 'b=(2, 3)']`: commas split only outside brackets
    and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote:
            quote = None if c == quote else quote
        elif c in '\'"':
            quote = c
        elif c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        elif c == ',' and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_kwargs(flag: str, text: str) -> Dict[str, Any]:
    """`key=value,...` -> a dict (module doc); '' -> {}. Raises ValueError (one line)
    for an item without `=` or a key that is not a Python name."""
    out: Dict[str, Any] = {}
    for item in split_kwargs(text):
        key, sep, value = item.partition('=')
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.match(key):
            raise ValueError(f'--{flag}={text}: expected key=value,... (e.g. units=64,'
                             f'activation=relu), got {item!r}')
        if key in out:
            raise ValueError(f'--{flag}={text}: {key!r} is given twice')
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def format_kwargs(flag: str, kwargs: Union[str, Mapping[str, Any]]) -> str:
    """The `key=value,...` text of a dict (the Python API's `torso_kwargs=dict(...)`);
    text is checked and kept. Raises ValueError for a value that is not a literal (it
    would not survive `run_config.json`)."""
    if isinstance(kwargs, str):
        parse_kwargs(flag, kwargs)
        return kwargs
    if not isinstance(kwargs, Mapping):
        raise ValueError(f'{flag} takes a dict or key=value,... text, got {kwargs!r}')
    text = ','.join(f'{k}={v!r}' for k, v in kwargs.items())
    if parse_kwargs(flag, text) != dict(kwargs):
        raise ValueError(f'{flag}={dict(kwargs)!r}: the values must be Python literals '
                         f'(numbers, strings, tuples); give the factory a default for the rest')
    return text


def register_local(name: str, factory: Callable[..., Any]) -> str:
    """`<local>:NAME` for `factory` in this process (a later registration of the same
    name replaces it)."""
    name = re.sub(r'[^\w.-]', '', name) or 'factory'  # '<lambda>' -> 'lambda'
    spec = f'{LOCAL}:{name}'
    _LOCAL_FACTORIES[spec] = factory
    return spec


def local_factory(spec: str) -> Callable[..., Any]:
    """The factory `register_local` registered as `spec`; ValueError (one line) when this
    process has none, as in another process of a run."""
    try:
        return _LOCAL_FACTORIES[spec]
    except KeyError:
        raise ValueError(
            f'{spec} is a network given to train() in another process (a lambda, a closure, '
            f'a function of __main__ or a layer object): only that process can build it. '
            f'For --launcher=multiprocess|ray or a --resume from the command line, define '
            f'the factory at module level in an importable module and give MODULE:FUNCTION'
        ) from None
