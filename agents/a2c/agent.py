"""A2C as the wiring sees it: the contract."""

from typing import Any, Callable, Tuple

from reverb_agents.agents import contract, network_config
from reverb_agents.agents.a2c.config import A2CConfig
from reverb_agents.agents.a2c.learning import METRICS, A2CLearner
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace


class A2C(contract.Agent):
    """Advantage actor-critic on fresh sequences, with the extras its config declares."""

    name = 'a2c'
    config_class = A2CConfig
    # One batch per round of the actor's environments (`batch_size` of them): each
    # update learns from the policy that acted, with no correction needed.
    run_defaults = {'num_envs': 16}

    def data_plan(self, config: A2CConfig) -> contract.DataPlan:
        # Every sequence goes to the queue only (replay_fraction 0: nothing replayed).
        return contract.DataPlan(
            sequence_length=config.unroll_length + 1, sequence_period=config.unroll_length,
            learned_steps=config.unroll_length, batch_sequences=config.batch_size,
            replay_fraction=0.0, replay_size=config.replay.replay_size,
            queue_size=config.replay.queue_size, min_replay_size=1)

    def build_core(self, observation_space: Any, action_space: ActionSpace,
                   config: A2CConfig) -> ActorCriticCore:
        return ActorCriticCore(observation_space, action_space, hidden_sizes=config.hidden_sizes,
                               lstm_size=network_config.lstm_units(config),
                               **config.network.core_options(),
                               normalize_observations=network_config.normalizes(
                                   config.normalize, observation_space))

    def build_learner(self, make_core: Callable[[], ActorCriticCore], action_space: ActionSpace,
                      config: A2CConfig) -> A2CLearner:
        return A2CLearner(make_core(), action_space, config)

    def demo_files(self, config: A2CConfig) -> Tuple[str, ...]:
        return config.signals.demo_files

    def metric_names(self, config: A2CConfig, action_space: ActionSpace) -> Tuple[str, ...]:
        return (config.critic_pretrain.metric_names() + METRICS + config.signals.metric_names()
                + config.prior.metric_names())
