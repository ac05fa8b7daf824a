"""The agents `launch/run.py --agent=NAME` knows. Registering one here is all
the wiring needs (see `agents/contract.py`); the contract test
(`tests/agents/test_contract.py`) then runs it through build, a learner step,
a checkpoint round trip and export."""

from typing import Dict

from reverb_agents.agents.a2c.agent import A2C
from reverb_agents.agents.acer.agent import ACER
from reverb_agents.agents.clear.agent import CLEAR
from reverb_agents.agents.contract import Agent
from reverb_agents.agents.sac.agent import SAC

AGENTS: Dict[str, Agent] = {agent.name: agent for agent in (CLEAR(), ACER(), SAC(), A2C())}
CONFIG_CLASSES: Dict[str, type] = {name: agent.config_class for name, agent in AGENTS.items()}


class UnknownAgentError(ValueError):
    pass


def get(name: str) -> Agent:
    if name not in AGENTS:
        raise UnknownAgentError(f'unknown agent {name!r}; choose one of {sorted(AGENTS)}')
    return AGENTS[name]
