"""Every preset in launch/presets/ parses into a valid run (flags that exist,
belong to the preset's agent, and values the configs accept) and trains for a
few hundred env steps."""

import dataclasses
import os

import pytest
from absl import flags

from reverb_agents.agents import registry
from reverb_agents.launch.runners import inprocess

PRESETS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'launch', 'presets')
# launch/benchmark.py's own flags (its presets are otherwise run flags).
BENCHMARK_ONLY = ('repeats', 'seconds', 'learner_steps', 'run_steps')


def presets():
    return sorted(name for name in os.listdir(PRESETS) if name.endswith('.flags'))


def test_there_are_presets():
    assert 'clear_cartpole.flags' in presets() and 'sac_pendulum.flags' in presets()


def preset_lines(name):
    """The preset's lines but blank ones and comments."""
    with open(os.path.join(PRESETS, name)) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith('#')]


def resolve_preset(name, tmp_path, *overrides):
    """The preset's (options, config) as `launch/run.py` resolves them, flags after it
    overriding it."""
    # train defines run.py's flags on absl's FLAGS
    from reverb_agents.launch.command_line import train as run
    lines = preset_lines(name)
    assert all(line.startswith('--') for line in lines), lines
    assert not any(line.startswith('--logdir') for line in lines), 'presets leave --logdir'
    kept = [line for line in lines if line[2:].split('=')[0] not in BENCHMARK_ONLY]
    flagfile = tmp_path / name
    flagfile.write_text('\n'.join(kept) + '\n')
    flags.FLAGS.unparse_flags()
    try:
        flags.FLAGS(['run.py', f'--flagfile={flagfile}', *overrides])
        return run.resolve()
    finally:
        flags.FLAGS.unparse_flags()


@pytest.mark.parametrize('name', presets())
def test_preset_resolves(name, tmp_path):
    options, config = resolve_preset(name, tmp_path)
    assert isinstance(config, registry.get(options.agent).config_class)


# What each run below trained (this file runs in one worker): presets that differ only
# in what the short run overrides (budget, target, launcher) or in the size of a number
# that is not zero (a learning rate, a batch, a layer's width) are the same wiring.
_RUN = {}


def _wiring(value):
    """`value` with every non-zero number replaced by 1 (dataclasses, dicts, sequences
    gone through): what a few hundred steps can tell apart."""
    if dataclasses.is_dataclass(value):
        return tuple((f.name, _wiring(getattr(value, f.name)))
                     for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return tuple(sorted((k, _wiring(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_wiring(v) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value != 0)
    return value


def preset_env_ids(name):
    """The environment ids a preset trains on (`--env`, or each of `--tasks`)."""
    for line in preset_lines(name):
        if line.startswith(('--env=', '--tasks=')):
            return line.split('=', 1)[1].split(',')
    return []


def needs_a_suite(name):
    """True for a preset of MinAtar, Atari or MuJoCo (`launch/environments/suites.py`): those run in
    tests/launch/test_presets_suites.py, so that pytest-xdist spreads the two files."""
    from reverb_agents.launch.environments import suites
    return any(suites.suite_of(env) for env in preset_env_ids(name))


def trained_presets(suite: bool):
    return [p for p in presets() if not p.startswith('benchmark_') and needs_a_suite(p) == suite]


@pytest.mark.parametrize('name', trained_presets(suite=False))
def test_preset_runs_a_few_hundred_steps(name, tmp_path):
    run_a_few_hundred_steps(name, tmp_path)


# Sizes a short run shrinks (a layer's width, a batch, an unroll, the sequences replay
# holds before it is sampled): non-zero numbers, the same wiring (`_wiring`), and the
# env steps a first batch needs fall from thousands to hundreds.
SMALL = dict(batch_size={'clear': 8, 'acer': 8, 'sac': 32},
             unroll_length={'clear': 5, 'acer': 5}, min_replay_size={'clear': 8},
             lstm_size=16, hidden_sizes=16,
             critic_hidden_sizes=16, advantage_hidden_sizes=16, signal_hidden_size=16)


def small_sizes(options, config):
    """Flags that shrink `config`'s non-zero sizes to `SMALL`'s (tuples keep their length)."""
    out = []
    for name, small in SMALL.items():
        small = small.get(options.agent) if isinstance(small, dict) else small
        if name == 'batch_size' and options.agent == 'sac' and config.unroll_length > 1:
            # A recurrent SAC's batch of whole sequences sizes its rate limiter's slack, by
            # which the budget below runs ahead of the first update: kept.
            continue
        value = getattr(config, name, getattr(getattr(config, 'signals', None), name, None))
        if value is None or small is None:
            continue
        if isinstance(value, tuple):
            out.append(f'--{name}=' + ','.join(str(small) for _ in value))
        elif value:
            out.append(f'--{name}={min(value, small)}')
    return out


def run_a_few_hundred_steps(name, tmp_path):
    """Each result's configuration, its sizes made small (`small_sizes`), trains, in one
    process, for a few hundred env steps (one batch's worth at least), evaluates and
    exports."""
    options, config = resolve_preset(name, tmp_path)
    # The wiring, not SAC's ten thousand random MuJoCo steps before its first update.
    warm_up = ['--learning_starts=256'] if getattr(config, 'learning_starts', 0) > 256 else []
    # Nor rounds of 32 or 64 environments: past 8 the number changes no wiring (`_wiring`).
    if options.num_envs > 8:
        warm_up.append('--num_envs=8')
    options, config = resolve_preset(name, tmp_path, *warm_up)
    warm_up += small_sizes(options, config)
    options, config = resolve_preset(name, tmp_path, *warm_up)
    plan = registry.get(options.agent).data_plan(config)
    from reverb_agents.launch.environments import suites
    atari = any(suites.suite_of(env) == suites.ATARI for env in preset_env_ids(name))
    # Budgets count frames: an action repeat's, and ALE's own frame skip (4 by default).
    frames = options.step_mul * (int(options.env_kwargs.get('frame_skip', 4)) if atari else 1)
    # Enough for a first batch: rounds of sequences until replay may be sampled, and
    # more, because the actors run ahead of a learner still compiling its step.
    rounds = -(-plan.min_replay_size // options.num_envs) + 2
    decisions = max(300, plan.batch_sequences * plan.sequence_length,
                    rounds * options.num_envs * plan.sequence_period)
    if plan.samples_per_insert:
        # A rate limiter holds the actors to the learner: a quarter more than one batch's
        # worth is already updates beyond the first (each costs a full SAC update).
        decisions = int(1.25 * decisions)
    else:
        # Only the full queue holds them back: past what it holds, a round being written
        # and what the learner's stream takes before its first step ends (in flight and
        # prefetched: under five batches), the budget is out of the actors' reach until
        # the learner has stepped, however long its first step compiles.
        held = plan.queue_size + options.num_envs + 5 * plan.batch_sequences
        decisions = max(3 * decisions, (held + 1) * plan.sequence_period)
    steps = frames * decisions
    if options.is_sequence:
        # The same steps over the visits, every task evaluated at the start and the end
        # (an evaluation of MinAtar Freeway is 2,500 policy calls, whatever the policy).
        per_task = steps // len(options.tasks) + 1
        overrides = [f'--steps_per_task={per_task}',
                     f'--eval_every_steps={per_task * len(options.tasks)}']
    else:
        overrides = [f'--num_steps={steps}']
    if atari:
        # An untrained greedy Breakout policy that never fires plays ALE's whole
        # 108,000-frame episode (80 s here): the evaluation's wiring, in 2,000 frames.
        overrides.append('--env_kwargs=max_episode_steps=2000')
    if getattr(config, 'signals', None) is not None and config.signals.bc_pretrain_steps:
        overrides.append('--bc_pretrain_steps=20')  # the wiring, not a thousand updates
    options, config = resolve_preset(name, tmp_path, *warm_up, *overrides, '--eval_episodes=1',
                                     f'--logdir={tmp_path / "run"}')
    # In one process whatever the preset's launcher (the multi-process and Ray runs are
    # the same configuration, tested as such in test_multiprocess.py and test_ray.py).
    options = dataclasses.replace(options, log_interval_s=1000.0, target_return=None,
                                  launcher='inprocess')
    key = repr((_wiring(dataclasses.replace(options, logdir='-')), _wiring(config)))
    if key in _RUN:
        return  # the configuration another preset's run has just trained
    _RUN[key] = name
    summary = inprocess.train(dataclasses.replace(options, logdir=str(tmp_path / 'run')), config)
    assert summary['learner_steps'] >= 1 and summary['env_steps'] >= steps
    assert summary['eval_return_mean'] is not None
