"""`--help` of every script (`launch/command_line/help.py`): exit 0, the script's own flags, grouped,
one agent's fields with that agent's docs and defaults; no absl or TensorFlow flags, no
native noise.

The scripts run as the user runs them: `python launch/<name>.py` and the
installed command's module (`python -m reverb_agents.launch.cli train`), in
subprocesses started together (each imports TensorFlow, which takes seconds).
"""

import os
import re
import subprocess
import sys

import pytest
from absl import flags

from reverb_agents.agents import configs, registry
from reverb_agents.launch.command_line import run_flags as command_line
from reverb_agents.launch.runs import console
from reverb_agents.launch.command_line import help as help_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# absl's own flags and TensorFlow's test and TPU flags, which --helpfull lists.
FOREIGN = ('--logtostderr', '--test_srcdir', '--test_tmpdir', '--delta_threshold',
           '--tpu', '--only_check_args', '--flagfile')


def _start(argv, cwd=ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *argv], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen):
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, stdout, stderr


def _flag_names(text: str, section: str) -> list:
    """The `--name` entries of one `section:` of a help text."""
    block = text.split(f'\n{section}:\n', 1)[1].split('\n\n', 1)[0]
    return re.findall(r'^  --(\w+)', block, re.M)


def _no_noise(stderr: str) -> None:
    noisy = [line for line in stderr.splitlines() if console.NOISE.search(line)]
    assert not noisy, noisy


def test_every_script_help_exits_0_with_its_own_flags_and_no_noise():
    scripts = {name: _start([os.path.join('launch', f'{name}.py'), '--help'])
               for name in ('evaluate', 'record', 'plot', 'benchmark', 'benchmark_ray',
                            'bandit_baselines')}
    sac = _start(['-m', 'reverb_agents.launch.cli', 'train', '--agent=sac', '--help'])
    own = {'evaluate': ('saved_model', 'episodes', 'eval_epsilon', 'verbose'),
           'record': ('saved_model', 'output', 'sample'),
           'plot': ('continual', 'output', 'group_by'),
           'benchmark': ('agent', 'repeats', 'compare_samplers'),
           'benchmark_ray': ('num_actors', 'ray_address', 'flagfile_run'),
           'bandit_baselines': ('env', 'episodes', 'horizon')}
    for name, process in scripts.items():
        code, stdout, stderr = _finish(process)
        assert code == 0, (name, stderr[-2000:])
        _no_noise(stderr)
        assert stdout.startswith(f'usage: python launch/{name}.py'), stdout[:200]
        # The tool's own doc, not the checkout shim's that ran it (launch/tools/).
        assert 'in a checkout: runs' not in stdout, stdout[:300]
        listed = _flag_names(stdout, 'flags')
        assert set(own[name]) <= set(listed), (name, listed)
        # Nothing the script does not define: absl's flags, TensorFlow's, the agents'.
        foreign = [f for f in FOREIGN if re.search(re.escape(f) + r'(?!\w)', stdout)]
        assert 'batch_size' not in listed and not foreign, stdout

    # The installed command runs launch/run.py as __main__: the same help.
    code, stdout, stderr = _finish(sac)
    assert code == 0, stderr[-2000:]
    _no_noise(stderr)
    assert stdout.startswith('usage: reverb-agents train ')
    assert {'agent', 'env', 'num_steps', 'preset', 'logdir'} <= set(_flag_names(stdout, 'run'))
    assert 'no_preset' not in stdout  # the hidden alias of --preset=none
    assert not any(f in stdout for f in FOREIGN), stdout
    assert re.search(r'^  --batch_size=256 +transitions per learner step', stdout, re.M)
    assert f'  --num_steps={registry.AGENTS["sac"].run_defaults["num_steps"]} ' in stdout
    assert {'replay_size', 'queue_size'} <= set(_flag_names(stdout, 'replay (sac)'))
    assert 'learning_rate' in _flag_names(stdout, 'optimizer (sac)')
    assert 'curiosity_strength' in _flag_names(stdout, 'signals (sac)')
    listed = [n for section in ('agent', 'replay', 'optimizer', 'signals')
              for n in _flag_names(stdout, f'{section} (sac)')]
    sac_fields = configs.flat_fields(registry.CONFIG_CLASSES['sac'])
    assert sorted(listed) == sorted(sac_fields)  # every field of SAC's config, once
    assert max(len(line) for line in stdout.splitlines()) <= 100  # wrapped (not a terminal)


def test_run_help_without_an_agent_lists_the_run_flags_only():
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    text = help_lib.run_help(fv, ['launch/run.py', '--help'])
    assert text.startswith('usage: python launch/run.py ')
    run_flags = _flag_names(text, 'run')
    assert {'agent', 'env', 'num_steps', 'preset', 'logdir', 'resume'} <= set(run_flags)
    assert {'launcher', 'role'} <= set(_flag_names(text, 'processes (--launcher=multiprocess'
                                                         '|ray, --role)'))
    assert '--no_preset' not in text and '--batch_size' not in text
    assert 'python launch/run.py --agent=NAME --help' in text
    # Per-agent run defaults are listed when no agent is named.
    assert re.search(r'^  --num_steps +environment-step budget \(default \d+; ', text, re.M)


def test_agent_fields_come_with_that_agents_doc_and_default():
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    for agent, config_class in registry.CONFIG_CLASSES.items():
        text = help_lib.run_help(fv, ['run.py', '--agent', agent, '--help'])
        fields = configs.flat_fields(config_class)
        defaults = configs.flat_defaults(config_class)
        for name in ('batch_size', 'learning_rate', 'replay_size'):
            doc = help_lib.first_sentence(configs.doc(fields[name][0]))
            value = help_lib.show_value(defaults[name])
            entry = re.search(rf'^  --{name}={re.escape(value)} +(.*)$', text, re.M)
            assert entry and doc.startswith(entry.group(1)), (agent, name, entry)
        other = {n for c in registry.CONFIG_CLASSES.values() for n in configs.flat_fields(c)}
        assert not (other - set(fields)) & set(re.findall(r'^  --(\w+)', text, re.M))
    # absl's help of a shared flag gives every agent's own doc (clear counts sequences).
    batch = fv['batch_size'].help
    assert 'sequences per learner step' in batch and 'transitions per learner step' in batch


def test_an_unknown_agent_is_one_error_line_and_exit_1(capsys):
    fv = flags.FlagValues()
    command_line.define_flags(fv)
    with pytest.raises(SystemExit) as exit_:
        help_lib.handle_run_help(fv, ['run.py', '--agent=nope', '-h'])
    out, err = capsys.readouterr()
    assert exit_.value.code == 1 and out == ''
    assert err.splitlines() == [
        f"error: unknown agent 'nope'; choose one of {sorted(registry.AGENTS)}"]
    # After `--`, arguments are not flags: no help asked for.
    assert not help_lib.wants_help(['run.py', '--', '--help'])
