"""reverb-agents: IMPALA/CLEAR, ACER and SAC on TensorFlow 2, Sonnet and one Reverb server.

The checkout's folders are installed under this one name (setup.py's
`package_dir`): `reverb_agents.agents` (the agents), `reverb_agents.networks`,
`reverb_agents.replay` and `reverb_agents.launch` (the wiring and the tools).
The Python API is here, loaded on first use so that `import reverb_agents`
starts no TensorFlow:

    from reverb_agents import train, load_policy
"""

import importlib

__version__ = '0.1.0'

_API = {'train': 'reverb_agents.launch.api', 'Result': 'reverb_agents.launch.api',
        'load_policy': 'reverb_agents.launch.policy', 'Policy': 'reverb_agents.launch.policy'}
__all__ = sorted(_API)


def __getattr__(name):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
