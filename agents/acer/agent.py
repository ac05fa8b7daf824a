"""ACER as the wiring sees it: the contract, with its on-policy/replay schedule."""

from typing import Any, Callable, Tuple

from reverb_agents.agents import contract, network_config
from reverb_agents.agents.acer.config import ACERConfig
from reverb_agents.agents.acer.learning import METRICS, ACERLearner
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError
from reverb_agents.networks.popart import METRICS as POPART_METRICS, task_metric_names
from reverb_agents.networks.shadowed import ShadowedCore


class ACER(contract.Agent):
    """Retrace, truncated importance sampling with bias correction, trust region."""

    name = 'acer'
    config_class = ACERConfig
    run_defaults = {'save_replay': True}  # a resumed run keeps its replay

    def data_plan(self, config: ACERConfig) -> contract.DataPlan:
        # One on-policy batch from `queue`, then `replay_ratio` replayed ones once
        # replay holds `min_replay_sequences` (checked without blocking: the actors
        # wait on the queue the on-policy batches drain). `disable_online_update`
        # still drains the queue, but learns nothing from it.
        return contract.DataPlan(
            sequence_length=config.sequence_length,
            sequence_period=config.unroll_length,
            learned_steps=config.unroll_length,
            batch_sequences=config.batch_size,
            replay_fraction=0.0,
            replay_size=config.replay.replay_size,
            queue_size=config.replay.queue_size,
            min_replay_size=1,
            replay_eviction=config.replay.replay_eviction,
            priority_exponent=config.replay.sampling_exponent,
            mixing=contract.ReplaySchedule(ratio=config.replay_ratio,
                                             poisson=config.replay_ratio_poisson,
                                             start_size=config.min_replay_sequences,
                                             learn_fresh=not config.disable_online_update))

    def build_core(self, observation_space: Any, action_space: ActionSpace,
                   config: ACERConfig) -> ActorCriticCore:
        if len(action_space.leaves) != 1:
            raise UnsupportedSpaceError(
                f'acer supports one Discrete or one Box action space, got {action_space.space}')
        common = dict(hidden_sizes=config.hidden_sizes, lstm_size=network_config.lstm_units(config),
                      **config.network.core_options(),
                      reward_transform=network_config.reward_input(
                          config.prev_reward_input, config.reward_scaling, config.reward_clipping),
                      **network_config.normalization_options(config, observation_space))
        # 'acted': the actors step the average network too (networks.shadowed).
        core_class = ShadowedCore if config.average_network_state == 'acted' else ActorCriticCore
        if action_space.is_discrete:
            # Q(x, .) from a Q head; V = sum_a pi(a) Q(a), so no value head.
            return core_class(observation_space, action_space,
                              num_q_values=action_space.leaves[0].size, baseline=False,
                              **common)
        # The stochastic dueling network: a V head and an A(x, a) MLP.
        return core_class(observation_space, action_space,
                          advantage_hidden_sizes=config.advantage_hidden_sizes, **common)

    def for_tasks(self, config: ACERConfig, num_tasks: int) -> ACERConfig:
        return network_config.for_tasks(config, num_tasks)

    def build_learner(self, make_core: Callable[[], ActorCriticCore], action_space: ActionSpace,
                      config: ACERConfig) -> ACERLearner:
        return ACERLearner(make_core(), action_space, config, make_core)

    def metric_names(self, config: ACERConfig, action_space: ActionSpace) -> Tuple[str, ...]:
        return (METRICS + (POPART_METRICS + task_metric_names(config.num_tasks)
                           if config.value_normalization == 'popart' else ())
                + config.replay.metric_names() + config.prior.metric_names())
