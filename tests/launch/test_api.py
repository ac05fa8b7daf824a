"""The README's Python API example, run as written (`from launch import train, load_policy`)."""

import os
import re
import subprocess
import sys

import pytest

from reverb_agents.launch import api

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_example() -> str:
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    section = text[text.index('## Python API'):]
    return re.search(r'```python\n(.*?)```', section, re.S).group(1)


def test_the_readme_example_runs_and_learns(tmp_path):
    """In a fresh interpreter, from a directory of its own (`runs/` goes there). The
    example stops at a training return of 400 (the last 20 sampled episodes) and a greedy
    one as high: its policy has learned, if not always to 500."""
    script = tmp_path / 'example.py'
    script.write_text(readme_example())
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=400,
                            env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL='3'))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.split('\n')
    eval_return, logdir = lines[0].split()
    assert float(eval_return) > 100, result.stdout  # a random policy: about 20
    assert logdir.startswith('runs/clear-CartPole-v1-') and (tmp_path / logdir).is_dir()
    assert float(lines[1]) > 100, result.stdout
    assert 'reached_target": true' in (tmp_path / logdir / 'summary.json').read_text()


def test_bad_keywords_raise_the_command_lines_message(tmp_path):
    with pytest.raises(ValueError, match="Unknown command line flag 'lerning_rate'"):
        api.train(num_steps=100, lerning_rate=0.1, logdir=str(tmp_path / 'a'))
    with pytest.raises(ValueError, match='learning_rate must be positive'):
        api.train(num_steps=100, learning_rate=0.0, logdir=str(tmp_path / 'b'))
    with pytest.raises(ValueError, match="unexpected keyword argument 'nope'"):
        api.train(num_steps=100, env_kwargs={'nope': 1}, logdir=str(tmp_path / 'c'))
    assert not os.listdir(tmp_path)
