"""Wiring: setup, learner loop, runners, launchers; `launch.environments`: the
environments a run acts in (they import no wiring); `launch.tools`: the command-line
tools (evaluate, record, plot, benchmark), which nothing imports. The Python API:
`from launch import train, load_policy` (`launch/api.py`). Loaded on first use (by
name, through importlib): importing `launch.policy` or the command line's console
filter must not start TensorFlow's wiring, and the wiring's modules import this
package.
TensorFlow's native start-up lines are filtered while the API loads, as
`reverb_agents.train` filters them (`console.native_noise_filtered`).
"""

import importlib

_API = {'train': f'{__name__}.api', 'Result': f'{__name__}.api',
        'load_policy': f'{__name__}.policy'}


def __getattr__(name):
    if name in _API:
        from reverb_agents.launch import console  # imports nothing heavy
        with console.native_noise_filtered():
            module = importlib.import_module(_API[name])
        return getattr(module, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
