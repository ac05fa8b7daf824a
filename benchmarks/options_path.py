"""The path a run's options take through the library: prints JSON.

    python benchmarks/options_path.py [--root=/path/to/another/checkout]

Trains CLEAR on CartPole-v1 for 3,000 env steps through the Python API (`train`)
with a profiler on every thread. A call into the library's code is a visit to its
module when the call's arguments hold the run's `RunOptions`, directly or through an
object's `options` or `setup` attribute (two levels), the options' own methods
aside. Consecutive visits to one module are one stay; a return is a stay in a
module the path had left before. The same counts by room (`launch`'s
sub-package, or the top-level package elsewhere). `--root` runs another checkout's
code (another commit's work tree), as benchmarks/startup.py does
(docs/design.md#layout).
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import threading
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_package(root: str) -> None:
    """`reverb_agents` from `root`'s folders, not the installed (editable) package."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if 'editable' not in getattr(f, '__name__', type(f).__module__).lower()]
    spec = importlib.util.spec_from_file_location(
        'reverb_agents', os.path.join(root, 'reverb_agents', '__init__.py'),
        submodule_search_locations=[os.path.join(root, 'reverb_agents'), root])
    module = importlib.util.module_from_spec(spec)
    sys.modules['reverb_agents'] = module
    spec.loader.exec_module(module)


def _stays(path: List[str]) -> Dict[str, Any]:
    stays: List[str] = []
    for module in path:
        if not stays or stays[-1] != module:
            stays.append(module)
    returns = sum(1 for i, module in enumerate(stays) if module in stays[:i])
    return {'stays': len(stays), 'modules': len(set(stays)), 'returns': returns,
            'path': stays}


def _room(module: str) -> str:
    parts = module.split('.')
    return '.'.join(parts[:2]) if parts[0] in ('launch', 'agents') and len(parts) > 2 \
        else parts[0] if parts[0] != 'launch' else module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--root', default=HERE, help='the checkout whose code runs')
    root = os.path.abspath(parser.parse_args().root)
    _load_package(root)
    from reverb_agents.launch import api
    try:
        from reverb_agents.launch.runs.options import RunOptions
    except ImportError:  # a checkout before launch/'s rooms
        from reverb_agents.launch.options import RunOptions

    def holds(value: Any, depth: int = 2) -> bool:
        if type(value) is RunOptions:
            return True
        if depth == 0:
            return False
        try:
            attributes = object.__getattribute__(value, '__dict__')
        except Exception:  # noqa: BLE001: slots, proxies and wrappers hold no options
            return False
        return any(holds(v, depth - 1) for k, v in attributes.items()
                   if k in ('options', 'setup', '_options', '_setup'))

    path: List[str] = []

    def profile(frame, event, arg):
        del arg
        if event != 'call':
            return
        relative = os.path.relpath(frame.f_code.co_filename, root)
        if relative.startswith('..') or not relative.endswith('.py') \
                or relative.startswith(('tests', 'benchmarks')):
            return
        module = relative[:-3].replace(os.sep, '.')
        try:
            arguments = dict(frame.f_locals)
            if type(arguments.get('self')) is RunOptions:
                return  # the options' own methods: asked, not visited
            if any(holds(v) for v in arguments.values()) and (not path or path[-1] != module):
                path.append(module)
        except Exception:  # noqa: BLE001: a frame whose locals cannot be read
            return

    logdir = os.path.join(tempfile.mkdtemp(), 'run')
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        api.train('clear', 'CartPole-v1', 3000, logdir=logdir, export=False)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    by_module = _stays(path)
    by_room = _stays([_room(m) for m in path])
    print(json.dumps({'root': root, **by_module,
                      'rooms': {k: v for k, v in by_room.items() if k != 'path'}}, indent=1))


if __name__ == '__main__':
    main()
