"""The presets: absl flagfiles shipped as package data (`launch/presets/*.flags`, with
the demonstrations some of them name in `launch/presets/demos/`), found through
`importlib.resources` so that an installed wheel has them as a checkout does.
Imports no TensorFlow (`reverb-agents presets` lists them).
"""

import os
import re
from importlib import resources
from typing import List, Optional

from absl import flags

PRESETS = str(resources.files('reverb_agents.launch') / 'presets')  # the flagfiles
CHECKOUT_PRESETS = 'launch/presets/'  # how presets and the README name their own files
NO_PRESET = 'none'  # --preset=none


def env_name(env_id: str) -> str:
    """'CartPole-v1' -> 'cartpole', 'pkg.mod:My-Env-v0' -> 'myenv' (preset and run names)."""
    name = env_id.rpartition(':')[2]
    name = re.sub(r'-v\d+$', '', name)
    return re.sub(r'[^a-z0-9]', '', name.lower())


def list_presets() -> List[str]:
    """The presets' names (`clear_cartpole`, ...), sorted."""
    return sorted(name[:-len('.flags')] for name in os.listdir(PRESETS)
                  if name.endswith('.flags'))


def default_preset(agent: str, env: str) -> Optional[str]:
    """`launch/presets/<agent>_<env>.flags` when it exists, else None."""
    path = os.path.join(PRESETS, f'{agent}_{env_name(env)}.flags')
    return path if os.path.exists(path) else None


def preset_path(name: str) -> str:
    """The flagfile `--preset=name` means: a preset's name, or a path to a .flags file.
    Raises `flags.Error` (one line) for neither."""
    if os.path.isfile(name):
        return name
    path = os.path.join(PRESETS, f'{name.removesuffix(".flags")}.flags')
    if os.path.isfile(path):
        return path
    raise flags.Error(f'--preset={name}: no such preset or .flags file (presets: '
                      f'{", ".join(list_presets())})')


def preset_name(path: str) -> str:
    """'clear_cartpole' for a preset's own file, else the path as given."""
    if os.path.dirname(os.path.abspath(path)) == os.path.abspath(PRESETS):
        return os.path.basename(path).removesuffix('.flags')
    return path


def package_path(path: str) -> str:
    """`path` itself when it exists; else, for `launch/presets/...` (how presets name their
    recorded demonstrations), the same file in the installed presets."""
    if path and not os.path.exists(path) and path.startswith(CHECKOUT_PRESETS):
        installed = os.path.join(PRESETS, path[len(CHECKOUT_PRESETS):])
        if os.path.exists(installed):
            return installed
    return path
