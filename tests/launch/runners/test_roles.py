"""Tests for launch/runners/roles.py's check that a role and the replay server agree."""

import pytest
import reverb

from reverb_agents.agents import registry
from reverb_agents.launch.runners import roles
from reverb_agents.launch.runs import rundir
from reverb_agents.launch.building import setup as setup_lib
from reverb_agents.launch.runs.options import RunOptions


def _setup(agent, env, num_envs):
    options = RunOptions(agent=agent, env=env, num_envs=num_envs)
    config = registry.get(agent).config_class()
    envs = setup_lib.make_envs(options, config, 1, 0)
    try:
        return setup_lib.make_setup(options, config, envs)
    finally:
        envs.close()


def test_roles_accept_their_own_server_and_name_another_config(reverb_server):
    served = _setup('sac', 'Pendulum-v1', 4)
    server = reverb_server(setup_lib.make_server_tables(served))
    address = f'localhost:{server.port}'
    client = reverb.Client(address)
    roles._check_signature(client, served, address)  # the same flags: no error
    # Items stored packed still tell configs apart: another environment,
    # another number of environments per item.
    for other in (_setup('sac', 'MountainCarContinuous-v0', 4),
                  _setup('sac', 'Pendulum-v1', 8)):
        with pytest.raises(rundir.TrainingError, match='signature differs'):
            roles._check_signature(client, other, address)
