"""The agents `launch/run.py --agent=NAME` knows, and how to build each one."""

import dataclasses
from typing import Any, Callable, Dict

from agents.clear.config import CLEARConfig
from agents.clear.learning import CLEARLearner
from networks.cores import ActorCriticCore
from networks.distributions import ActionSpace


@dataclasses.dataclass(frozen=True)
class AgentDefinition:
    name: str
    config_class: type
    build_core: Callable[[Any, ActionSpace, Any], Any]  # (obs space, action space, config)
    build_learner: Callable[[Any, ActionSpace, Any], Any]  # (core, action space, config)


def _actor_critic_core(observation_space, action_space: ActionSpace, config) -> ActorCriticCore:
    return ActorCriticCore(observation_space, action_space, torso=config.torso,
                           hidden_sizes=tuple(config.hidden_sizes), lstm_size=config.lstm_size)


AGENTS: Dict[str, AgentDefinition] = {
    'clear': AgentDefinition('clear', CLEARConfig, _actor_critic_core, CLEARLearner),
}


class UnknownAgentError(ValueError):
    pass


def get(name: str) -> AgentDefinition:
    if name not in AGENTS:
        raise UnknownAgentError(f'unknown agent {name!r}; choose one of {sorted(AGENTS)}')
    return AGENTS[name]
