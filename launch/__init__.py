"""Wiring: setup, learner loop, runners, launchers. The Python API: `from launch import
train, load_policy` (`launch/api.py`). Loaded on first use (by name, through
importlib): importing `launch.policy` or the command line's console filter
must not start TensorFlow's wiring, and the wiring's modules import this package.
"""

import importlib

_API = {'train': f'{__name__}.api', 'Result': f'{__name__}.api',
        'load_policy': f'{__name__}.policy'}


def __getattr__(name):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
