"""The wheel holds every package of the checkout: a folder of modules without an
`__init__.py` would be left out by setup.py's `find_packages` and fail only once
installed (not in an editable checkout)."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('folder', ['agents', 'networks', 'replay', 'launch', 'reverb_agents'])
def test_every_folder_of_modules_is_a_package(folder):
    missing = []
    for parent, dirs, files in os.walk(os.path.join(ROOT, folder)):
        dirs[:] = [d for d in dirs if d != '__pycache__']
        if any(name.endswith('.py') for name in files) and '__init__.py' not in files:
            missing.append(os.path.relpath(parent, ROOT))
    assert not missing, f'folders of modules without __init__.py (not in the wheel): {missing}'
