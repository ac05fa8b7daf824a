"""`launch/runs/rundir.py`: a stored run's config read back as that run had it, and
`--resume` checked against it."""

import dataclasses
import json

import pytest
from absl import logging

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.runs.options import RunOptions


def _store(tmp_path, config: dict, agent: str = 'clear') -> str:
    with open(tmp_path / rundir.RUN_CONFIG, 'w') as f:
        json.dump({'agent': agent, 'env': 'Pendulum-v1', 'config': config}, f)
    return str(tmp_path)


def test_a_run_stored_before_a_field_existed_reads_back_with_the_value_it_had(tmp_path):
    """A run stored before `rescale_actions` acted in its Box's own units, and one
    stored before `observation_map` standardised its observations: rebuilt (for an
    export or a resume) each still does, though the fields' defaults have changed."""
    stored = dataclasses.asdict(CLEARConfig())
    assert stored['network'].pop('rescale_actions') is True
    assert stored['network'].pop('observation_map') == 'rms'
    config = rundir.read_run_config(_store(tmp_path, stored))['config']
    assert config['network']['rescale_actions'] is False
    assert config['network']['observation_map'] == 'standardize'
    network = configs.from_nested(CLEARConfig, config).network
    assert network.rescale_actions is False and network.observation_map == 'standardize'


def test_a_stored_field_is_read_as_stored(tmp_path):
    stored = dataclasses.asdict(CLEARConfig())
    config = rundir.read_run_config(_store(tmp_path, stored))['config']
    assert config['network']['rescale_actions'] is True
    assert config['network']['observation_map'] == 'rms'


def test_a_sac_run_stored_before_its_policy_average_reads_back_without_one(tmp_path):
    """SAC's final-policy average came after runs that had none; a CLEAR run stored
    without the field gains no legacy value (its default, 0, is what it had)."""
    stored = dataclasses.asdict(SACConfig())
    assert stored.pop('policy_average_tau') > 0
    for agent in ('sac', 'clear'):
        (tmp_path / agent).mkdir()
    config = rundir.read_run_config(_store(tmp_path / 'sac', stored, 'sac'))['config']
    assert config['policy_average_tau'] == 0.0
    stored = dataclasses.asdict(CLEARConfig())
    assert stored.pop('policy_average_tau') == 0.0
    clear = rundir.read_run_config(_store(tmp_path / 'clear', stored))
    assert 'policy_average_tau' not in clear['config']


def test_resume_warns_of_a_field_the_run_does_not_record_and_refuses_one_that_differs(
        tmp_path, monkeypatch):
    stored = dataclasses.asdict(CLEARConfig())
    stored.pop('entropy_cost')  # as if the run started before the field existed
    logdir = _store(tmp_path, stored)
    (tmp_path / 'checkpoints').mkdir()
    options = RunOptions(agent='clear', env='Pendulum-v1', logdir=logdir)
    warnings = []
    monkeypatch.setattr(logging, 'warning', lambda *args: warnings.append(args[0] % args[1:]))
    rundir.check_start(logdir, True, options, CLEARConfig())
    assert warnings == [f'--resume: {logdir} does not record --entropy_cost (the run started '
                        f'before it existed); resuming with --entropy_cost='
                        f'{CLEARConfig().entropy_cost}']
    with pytest.raises(rundir.TrainingError,
                       match=r'other flags: --discounting=0.99 \(now 0.9\); resume with'):
        rundir.check_start(logdir, True, options, CLEARConfig(discounting=0.9))
