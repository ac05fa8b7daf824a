"""CLEAR (and IMPALA, `replay_fraction=0`) as the wiring sees it: the contract."""

from typing import Any, Callable, Tuple

from reverb_agents.agents import contract, network_config
from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.agents.clear.learning import METRICS, CLEARLearner
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.popart import METRICS as POPART_METRICS, task_metric_names
from reverb_agents.replay.batches import split_batch


class CLEAR(contract.Agent):
    """V-trace actor-critic on mixed fresh/replayed batches with behavioural cloning."""

    name = 'clear'
    config_class = CLEARConfig
    # With `replay_fraction` 0.9375: docs/benchmarks.md#more-updates-per-env-step.
    run_defaults = {'num_envs': 16}

    def data_plan(self, config: CLEARConfig) -> contract.DataPlan:
        # Each learner step takes `replay_fraction` of its sequences from replay
        # and the rest fresh; every sequence is written to both tables it needs.
        num_replayed = split_batch(config.batch_size, config.replay_fraction)[1]
        return contract.DataPlan(
            sequence_length=config.sequence_length,
            sequence_period=config.unroll_length,
            learned_steps=config.unroll_length,
            batch_sequences=config.batch_size,
            replay_fraction=config.replay_fraction,
            replay_size=config.replay.replay_size,
            queue_size=config.replay.queue_size,
            min_replay_size=max(config.min_replay_size, num_replayed),
            replay_eviction=config.replay.replay_eviction,
            priority_exponent=config.replay.sampling_exponent)

    def build_core(self, observation_space: Any, action_space: ActionSpace,
                   config: CLEARConfig) -> ActorCriticCore:
        # The previous reward enters the core as the learner sees it (the seed).
        return ActorCriticCore(observation_space, action_space,
                               hidden_sizes=config.hidden_sizes,
                               lstm_size=network_config.lstm_units(config),
                               **config.network.core_options(),
                               reward_transform=network_config.reward_input(
                                   config.prev_reward_input, config.reward_scaling,
                                   config.reward_clipping),
                               **network_config.normalization_options(config, observation_space))

    def build_learner(self, make_core: Callable[[], ActorCriticCore], action_space: ActionSpace,
                      config: CLEARConfig) -> CLEARLearner:
        return CLEARLearner(make_core(), action_space, config)

    def for_tasks(self, config: CLEARConfig, num_tasks: int) -> CLEARConfig:
        return network_config.for_tasks(config, num_tasks)

    def demo_files(self, config: CLEARConfig) -> Tuple[str, ...]:
        return config.signals.demo_files

    def metric_names(self, config: CLEARConfig, action_space: ActionSpace) -> Tuple[str, ...]:
        # Critic pre-training steps return only theirs (`agents.extras`).
        return (config.critic_pretrain.metric_names() + METRICS
                + (POPART_METRICS + task_metric_names(config.num_tasks)
                   if config.value_normalization == 'popart' else ())
                + config.signals.metric_names() + config.replay.metric_names()
                + config.prior.metric_names())
