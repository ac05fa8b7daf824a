"""The agents `launch/run.py --agent=NAME` knows, and how to build each one.

An agent is its config class, its core, its learner, and its data plan: which
tables the actors write and the stream of batches the learner trains on
(CLEAR: one mixed fresh/replayed batch per step; ACER: one on-policy batch
then `replay_ratio` replayed ones).
"""

import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import reverb

from agents.acer.config import ACERConfig
from agents.acer.learning import ACERLearner
from agents.clear.config import CLEARConfig
from agents.clear.learning import CLEARLearner
from agents.sac.config import SACConfig
from agents.sac.learning import SACLearner
from networks.cores import ActorCriticCore
from networks.distributions import ActionSpace, UnsupportedSpaceError
from replay import dataset as dataset_lib
from replay import tables


@dataclasses.dataclass(frozen=True)
class AgentDefinition:
    name: str
    config_class: type
    build_core: Callable[[Any, ActionSpace, Any], Any]  # (obs space, action space, config)
    build_learner: Callable[..., Any]  # (core, action space, config, make_core)
    write_tables: Callable[[Any], List[str]]  # config -> tables each sequence goes into
    min_replay_size: Callable[[Any], int]  # config -> replay items before sampling
    # (address, signature, config, client, timeout_ms) -> the learner's data stream; it
    # ends when a table gave no data for timeout_ms (-1: never).
    batches: Callable[[str, Any, Any, reverb.Client, int], Iterator]
    squash_actions: bool = False  # continuous actions as tanh-squashed Gaussians (SAC)
    group_envs: bool = False  # one item holds all of an actor's environments (replay.trajectory)
    # config -> replayed samples per inserted item, held by the replay table (None: free)
    samples_per_insert: Callable[[Any], Optional[float]] = lambda config: None
    # config -> steps between the starts of consecutive sequences
    sequence_period: Callable[[Any], int] = lambda config: config.sequence_length - 1
    # config -> each actor's first env steps with uniformly random actions
    random_steps: Callable[[Any], int] = lambda config: 0
    # RunOptions fields this agent defaults differently (num_envs, num_steps, ...)
    run_defaults: Dict[str, Any] = dataclasses.field(default_factory=dict)


def _actor_critic_core(observation_space, action_space: ActionSpace, config,
                       num_q_values: int = 0) -> ActorCriticCore:
    return ActorCriticCore(observation_space, action_space, torso=config.torso,
                           hidden_sizes=tuple(config.hidden_sizes), lstm_size=config.lstm_size,
                           num_q_values=num_q_values)


# --- CLEAR / IMPALA ------------------------------------------------------------

def _clear_tables(config: CLEARConfig) -> List[str]:
    num_fresh, num_replayed = dataset_lib.split_batch(config.batch_size, config.replay_fraction)
    return ([tables.QUEUE] if num_fresh else []) + ([tables.REPLAY] if num_replayed else [])


def _clear_min_replay(config: CLEARConfig) -> int:
    return max(config.min_replay_size,
               dataset_lib.split_batch(config.batch_size, config.replay_fraction)[1])


def _clear_batches(address, signature, config: CLEARConfig, client,
                   timeout_ms: int = -1) -> Iterator:
    return iter(dataset_lib.mixed_dataset(address, signature, config.batch_size,
                                          config.replay_fraction, timeout_ms))


# --- ACER ------------------------------------------------------------------------

def _acer_core(observation_space, action_space: ActionSpace, config: ACERConfig):
    if len(action_space.leaves) != 1:
        raise UnsupportedSpaceError(
            f'acer supports one Discrete or one Box action space, got {action_space.space}')
    leaf = action_space.leaves[0]
    if leaf.kind == 'categorical':
        return _actor_critic_core(observation_space, action_space, config,
                                  num_q_values=leaf.size)
    return ActorCriticCore(observation_space, action_space, torso=config.torso,
                           hidden_sizes=tuple(config.hidden_sizes), lstm_size=config.lstm_size,
                           advantage_hidden_sizes=tuple(config.advantage_hidden_sizes))


def _acer_batches(address, signature, config: ACERConfig, client: reverb.Client,
                  timeout_ms: int = -1) -> Iterator:
    """One on-policy batch, then `replay_ratio` replayed ones once replay is warm."""
    fresh = iter(dataset_lib.mixed_dataset(address, signature, config.batch_size, 0.0,
                                           timeout_ms))
    replayed = None
    rng = np.random.default_rng()
    while True:
        batch = next(fresh, None)
        if batch is None:  # the queue gave nothing for timeout_ms
            return
        yield batch
        if replayed is None:
            # Never block on replay: the actors wait on the queue this stream drains.
            size = client.server_info(timeout=10)[tables.REPLAY].current_size
            if size < config.min_replay_sequences:
                continue
            replayed = iter(dataset_lib.mixed_dataset(address, signature, config.batch_size, 1.0,
                                                      timeout_ms))
        count = (rng.poisson(config.replay_ratio) if config.replay_ratio_poisson
                 else int(round(config.replay_ratio)))
        for _ in range(count):
            batch = next(replayed, None)
            if batch is None:
                return
            yield batch


# --- SAC ---------------------------------------------------------------------------

def _sac_core(observation_space, action_space: ActionSpace, config: SACConfig):
    # The actor only: no value head (the critics belong to the learner and are never
    # exported). Feed-forward: pi(a | s); recurrent: the LSTM also sees the previous
    # action and reward, as meta-RL cores do.
    return ActorCriticCore(observation_space, action_space, torso=config.torso,
                           hidden_sizes=tuple(config.hidden_sizes), lstm_size=config.lstm_size,
                           condition_on_previous=config.lstm_size > 0, baseline=False,
                           normalize_observations=config.normalize)


def _sac_batches(address, signature, config: SACConfig, client,
                 timeout_ms: int = -1) -> Iterator:
    return iter(dataset_lib.mixed_dataset(address, signature, config.sequences_per_batch,
                                          config.replay_fraction, timeout_ms))


def _sac_tables(config: SACConfig) -> List[str]:
    return [tables.REPLAY] + ([tables.QUEUE] if config.online_fraction > 0 else [])


AGENTS: Dict[str, AgentDefinition] = {
    'clear': AgentDefinition(
        'clear', CLEARConfig, _actor_critic_core,
        lambda core, space, config, make_core: CLEARLearner(core, space, config),
        _clear_tables, _clear_min_replay, _clear_batches),
    'acer': AgentDefinition(
        'acer', ACERConfig, _acer_core, ACERLearner,
        lambda config: [tables.QUEUE, tables.REPLAY], lambda config: 1, _acer_batches),
    'sac': AgentDefinition(
        'sac', SACConfig, _sac_core,
        lambda core, space, config, make_core: SACLearner(core, space, config),
        _sac_tables, lambda config: config.min_replay_size, _sac_batches,
        squash_actions=True,
        group_envs=True,
        samples_per_insert=lambda config: config.samples_per_insert,
        # Consecutive sequences share burn-in + n steps; feed-forward (T = 1): every
        # step starts one.
        sequence_period=lambda config: config.unroll_length,
        random_steps=lambda config: config.learning_starts,
        # Weights every 16 updates (two actor steps of 8 envs): each publication
        # and fetch copies the 256x256 networks, in the learner's process.
        run_defaults={'num_envs': 8, 'num_steps': 10_000, 'eval_episodes': 10,
                      'publish_period': 16}),
}


def reward_weights(config: Any) -> Optional[Tuple[float, ...]]:
    """The config's weights of a vector reward (SAC's `reward_weights`), or None."""
    return getattr(config, 'reward_weights', None)


class UnknownAgentError(ValueError):
    pass


def get(name: str) -> AgentDefinition:
    if name not in AGENTS:
        raise UnknownAgentError(f'unknown agent {name!r}; choose one of {sorted(AGENTS)}')
    return AGENTS[name]
