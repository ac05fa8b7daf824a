"""benchmarks/startup.py: its bad input, and the overlay that runs another checkout's
code in place of the installed one (the timed runs themselves are the benchmark)."""

import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'benchmarks', 'startup.py')


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def test_bad_input_is_one_error_line(tmp_path):
    for args, message in ((['--agents=clear,nope'], "unknown agents ['nope']"),
                          ([f'--baseline_root={tmp_path}'], 'is not a checkout')):
        result = run(*args)
        assert result.returncode == 1, result.stderr
        errors = [l for l in result.stderr.splitlines() if l.startswith('error:')]
        assert len(errors) == 1 and message in errors[0], result.stderr


def test_the_overlay_shadows_the_installed_package(tmp_path):
    spec = importlib.util.spec_from_file_location('startup', SCRIPT)
    startup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(startup)
    directory = startup.overlay(ROOT, str(tmp_path / 'overlay'))
    code = 'import reverb_agents.replay.batches as b; print(b.__file__)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=directory), cwd=str(tmp_path),
                         timeout=60)
    assert out.stdout.strip().startswith(directory), out.stderr
