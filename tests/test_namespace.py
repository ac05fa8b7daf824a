"""One import name: the library installs and imports as `reverb_agents` only, so a
foreign top-level `agents`, `launch`, `networks` or `replay` package (`openai-agents`
imports as `agents`) does not stop it from training and exporting; the
`reverb-agents` command finds its presets from any directory."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

FOREIGN = ('agents', 'launch', 'networks', 'replay')


def _foreign_packages(root) -> str:
    """Top-level packages with the checkout folders' names that fail on import."""
    for name in FOREIGN:
        os.makedirs(root / name)
        (root / name / '__init__.py').write_text(
            f'raise ImportError("the foreign {name} package was imported")\n')
    return str(root)


def test_a_foreign_agents_package_first_on_the_path_does_not_matter(tmp_path):
    foreign = _foreign_packages(tmp_path / 'foreign')
    code = textwrap.dedent("""
        import agents  # noqa: F401  (fails: proves the foreign package comes first)
    """)
    env = dict(os.environ, PYTHONPATH=foreign, TF_CPP_MIN_LOG_LEVEL='3')
    first = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60)
    assert 'the foreign agents package was imported' in first.stderr
    code = textwrap.dedent(f"""
        import json
        from reverb_agents import train
        result = train('clear', 'CartPole-v1', num_steps=2000, eval_episodes=1,
                       logdir={str(tmp_path / 'run')!r})
        print(json.dumps({{'saved_model': result.summary['saved_model'],
                           'policy': result.policy is not None}}))
    """)
    out = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report['policy'] and os.path.isfile(
        os.path.join(report['saved_model'], 'saved_model.pb'))


@pytest.mark.skipif(shutil.which('reverb-agents') is None,
                    reason='the reverb-agents command is not installed (pip install -e .)')
def test_the_command_finds_its_presets_from_another_directory(tmp_path):
    listed = subprocess.run(['reverb-agents', 'presets'], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0 and 'clear_cartpole' in listed.stdout.split()
    run = subprocess.run(
        ['reverb-agents', 'train', '--preset=clear_cartpole_gail', '--num_steps=2000',
         '--eval_episodes=1', f'--logdir={tmp_path / "run"}'],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert 'preset clear_cartpole_gail' in run.stdout + run.stderr
    summary = json.loads((tmp_path / 'run' / 'summary.json').read_text())
    assert summary['saved_model']
    unknown = subprocess.run(['reverb-agents', 'fly'], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60)
    assert unknown.returncode == 1 and unknown.stderr.startswith('error: unknown command')
