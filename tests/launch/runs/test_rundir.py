"""`launch/runs/rundir.py`: a stored run's config read back as that run had it."""

import dataclasses
import json

from reverb_agents.agents import configs
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.runs import rundir


def _store(tmp_path, config: dict) -> str:
    with open(tmp_path / rundir.RUN_CONFIG, 'w') as f:
        json.dump({'agent': 'clear', 'env': 'Pendulum-v1', 'config': config}, f)
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
