"""SAC as the wiring sees it: the contract."""

from typing import Any, Callable, Optional, Tuple

from reverb_agents.agents import configs, contract
from reverb_agents.agents import network_config
from reverb_agents.agents.sac.config import SACConfig
from reverb_agents.agents.sac.learning import SACLearner, metric_names
from reverb_agents.networks.cores import ActorCriticCore, SoftQPolicySpec
from reverb_agents.networks.distributions import ActionSpace, UnsupportedSpaceError


class SAC(contract.Agent):
    """Twin-critic maximum-entropy actor-critic; discrete, continuous and mixed actions."""

    name = 'sac'
    config_class = SACConfig
    squash_actions = True
    # Weights every 16 updates (two actor steps of 8 envs): each publication and
    # fetch copies the 256x256 networks, in the learner's process.
    run_defaults = {'num_envs': 8, 'num_steps': 10_000, 'eval_episodes': 10,
                    'publish_period': 16, 'save_replay': True, 'intra_op_threads': 1}

    def data_plan(self, config: SACConfig) -> contract.DataPlan:
        return contract.DataPlan(
            sequence_length=config.sequence_length,
            # Consecutive sequences share burn-in + n steps; feed-forward (T = 1):
            # every step starts one.
            sequence_period=config.unroll_length,
            learned_steps=config.unroll_length,
            batch_sequences=config.sequences_per_batch,
            replay_fraction=1.0 - config.online_fraction,
            replay_size=config.replay.replay_size,
            queue_size=config.replay.queue_size,
            min_replay_size=config.min_replay_size,
            replay_eviction=config.replay.replay_eviction,
            priority_exponent=config.replay.sampling_exponent,
            samples_per_insert=config.samples_per_insert,
            # Length-2 items are cheap to store but cost Reverb per sample: one item
            # holds all of an actor's environments (replay.trajectory).
            group_envs=True,
            random_steps=config.learning_starts)

    def build_core(self, observation_space: Any, action_space: ActionSpace,
                   config: SACConfig) -> ActorCriticCore:
        # A vector Box only, as CLEAR's and ACER's cores: a dict's leaves are left as they are.
        normalize = network_config.normalizes(config.normalize, observation_space)
        if config.entropy_penalty and not any(leaf.discrete for leaf in action_space.leaves):
            raise UnsupportedSpaceError(
                f"--entropy_penalty holds a discrete branch's entropy, and "
                f"{action_space.space} has none: leave it at 0 for continuous actions")
        if config.discrete_policy == 'critic':
            # ALF's discrete SAC: no actor network. The core holds the online critics
            # and the temperatures and acts with softmax(min_r Q_r(s, .) / alpha); the
            # learner trains them in place, so actors and the export get them.
            if not action_space.is_discrete:
                raise UnsupportedSpaceError(
                    f"--discrete_policy=critic needs purely discrete actions (Discrete or "
                    f"MultiDiscrete), got {action_space.space}; use --discrete_policy=actor")
            return ActorCriticCore(
                observation_space, action_space, torso=config.network.torso, hidden_sizes=(),
                torso_kwargs=config.network.torso_kwargs,
                lstm_size=0, condition_on_previous=False, baseline=False,
                normalize_observations=normalize,
                observation_map=config.network.observation_map,
                soft_q_policy=SoftQPolicySpec(config.num_critic_replicas,
                                              tuple(config.critic_hidden_sizes),
                                              config.initial_alpha_log))
        # The actor only: no value head (the critics belong to the learner and are
        # never exported). Feed-forward: pi(a | s); recurrent: the LSTM also sees the
        # previous action and reward, as meta-RL cores do.
        return ActorCriticCore(observation_space, action_space,
                               hidden_sizes=config.hidden_sizes,
                               policy_hidden_sizes=config.policy_hidden_sizes,
                               lstm_size=network_config.lstm_units(config),
                               **config.network.core_options(),
                               condition_on_previous=network_config.recurrent(config), baseline=False,
                               normalize_observations=normalize,
                               reward_transform=network_config.reward_input(config.prev_reward_input,
                                                                     config.reward_scaling))

    def build_learner(self, make_core: Callable[[], ActorCriticCore], action_space: ActionSpace,
                      config: SACConfig) -> SACLearner:
        return SACLearner(make_core(), action_space, config)

    def metric_names(self, config: SACConfig, action_space: ActionSpace) -> Tuple[str, ...]:
        return (metric_names(config, action_space) + config.signals.metric_names()
                + config.replay.metric_names()
                + config.prior.metric_names())

    def demo_files(self, config: SACConfig) -> Tuple[str, ...]:
        return config.signals.demo_files

    def reward_weights(self, config: SACConfig) -> Optional[Tuple[float, ...]]:
        return config.reward_weights

    def for_reward_size(self, config: SACConfig, reward_size: int) -> SACConfig:
        # As ALF: a vector reward with no weights is learned per component and
        # acted on by the plain sum. Weights of the wrong length are refused when
        # the environment is made (launch.environments).
        if reward_size and config.reward_weights is None:
            return configs.replace(config, reward_weights=(1.0,) * reward_size)
        return config
