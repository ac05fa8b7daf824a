"""One actor loop for every agent.

The actor steps a vector of B environments in lock step with one batched
policy call per step (`launch.acting.policy.Policy`), buffers steps in numpy and hands them to
the injected `SequenceWriter`; it pulls weights through the injected
`VariableFetcher` once per written sequence (off the per-step path). Nothing
in it loops over environments in Python except episode bookkeeping at
episode ends.
"""

import collections
import threading
from typing import Callable, Iterator, List, Optional

import gymnasium as gym
import numpy as np
import reverb
from threadpoolctl import threadpool_limits

from reverb_agents.launch.acting.policy import Policy
from reverb_agents.launch.environments.action_repeat import FRAMES
from reverb_agents.launch.environments.factory import reward_size
from reverb_agents.launch.environments.task_sequence import TASK
from reverb_agents.launch.runs.metrics import InfoMeans
from reverb_agents.networks.cores import ActorCriticCore
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import ACTION_MASK, numpy_caster
from reverb_agents.replay.trajectory import Step
from reverb_agents.replay.variables import VariableFetcher
from reverb_agents.replay.writer import SequenceWriter


class EpisodeStats:
    """Thread-safe record of finished episodes (returns, lengths), env steps and the
    environments' numeric `info` values (`info`, for TensorBoard)."""

    def __init__(self, window: int = 100):
        self._lock = threading.Lock()
        self.info = InfoMeans()
        self._returns = collections.deque(maxlen=window)
        self._lengths = collections.deque(maxlen=window)
        self.num_episodes = 0
        self.env_steps = 0  # frames: with an action repeat, every repeated frame
        self.agent_steps = 0  # decisions
        self._new = []

    def add_steps(self, n: int, decisions: Optional[int] = None):
        """`n` env steps (frames) taken in `decisions` decisions (default `n`)."""
        with self._lock:
            self.env_steps += n
            self.agent_steps += n if decisions is None else decisions

    def add_episode(self, episode_return: float, length: int):
        with self._lock:
            self._returns.append(episode_return)
            self._lengths.append(length)
            self.num_episodes += 1
            self._new.append((episode_return, length))

    def recent(self, n: Optional[int] = None):
        """(mean return, mean length, count) over the last `n` (default: window) episodes."""
        with self._lock:
            returns = list(self._returns)[-n:] if n else list(self._returns)
            lengths = list(self._lengths)[-n:] if n else list(self._lengths)
        if not returns:
            return float('nan'), float('nan'), 0
        return float(np.mean(returns)), float(np.mean(lengths)), len(returns)

    def recent_returns(self, n: int) -> List[float]:
        """The returns of the last `n` episodes."""
        with self._lock:
            return list(self._returns)[-n:]

    def pop_new(self):
        """Episodes finished since the last call (for TensorBoard)."""
        with self._lock:
            new, self._new = self._new, []
        return new


class Actor:
    """Acts in `envs` with `core` and writes sequences through `writer`."""

    def __init__(self,
                 envs: gym.vector.VectorEnv,
                 core: ActorCriticCore,
                 action_space: ActionSpace,
                 writer: Optional[SequenceWriter],
                 fetcher: Optional[VariableFetcher],
                 seed: int,
                 stats: Optional[EpisodeStats] = None,
                 deterministic: bool = False,
                 use_numpy: bool = True,
                 random_steps: int = 0):
        """`random_steps`: this actor's first env steps take uniformly random actions
        (SAC's `learning_starts`); the stored log-probability is the uniform one,
        the stored parameters and baseline stay the policy's."""
        # numpy's BLAS single-threaded in any process that acts: the policy's
        # matmuls are small, and a second BLAS thread only contends with Reverb's
        # for the other core (measured on CLEAR's 64-env actor:
        # docs/benchmarks.md#speed-against-stable-baselines3).
        threadpool_limits(1, user_api='blas')
        self._envs = envs
        self._core = core
        self._action_space = action_space
        self._writer = writer
        self._fetcher = fetcher
        self._seed = seed
        self.stats = stats or EpisodeStats()
        self._num_envs = envs.num_envs
        self._no_task = np.zeros([self._num_envs], np.int32)  # outside a task sequence
        self._cast = numpy_caster(envs.single_observation_space)
        self.policy = Policy(core, action_space, seed, deterministic, use_numpy)
        self._random_steps = random_steps
        self._rng = np.random.default_rng(seed)
        self._vector_reward = reward_size(envs) > 0

    def run(self, stop: Callable[[], bool], flush_timeout_ms: int = 1000,
            max_env_steps: Optional[int] = None, soft_budget: Optional[int] = None) -> None:
        """Acts until `stop()` is true (checked once per step) or, when given,
        `stats.env_steps` reaches `max_env_steps`.

        The budget is checked only right after a sequence was written, so every
        step taken reaches the learner: a run overshoots its budget by less
        than one round of sequences (`num_envs` x the writer's period).

        `soft_budget`: past it, the actor goes on only until a round's sequences are
        held back for `flush_timeout_ms` by the tables' rate limiter (a full queue, or
        SAC's update ratio reached). An actor stopping at the budget can leave the
        learner's last batch waiting for sequences that never come; one that acts on
        until the learner stops can be left blocked on a full queue. Held back, the
        learner has data for its last steps, and that round still reaches it.
        """
        for held in self.rounds(stop, flush_timeout_ms):
            if max_env_steps is not None and self.stats.env_steps >= max_env_steps:
                return
            if soft_budget is not None and self.stats.env_steps >= soft_budget and held:
                return

    def rounds(self, stop: Callable[[], bool], flush_timeout_ms: int = 1000) -> Iterator[bool]:
        """Acts until `stop()` is true, pausing after each round of written sequences
        (flushed, and the latest weights fetched): a generator, so its caller decides
        when the actor goes on (`run`, or a deterministic run's schedule). Each pause
        yields whether the tables' rate limiter held that round back."""
        # Long: one generator: its pause points would be lost if its loop were split into calls.
        B = self._num_envs
        obs, info = self._envs.reset(seed=self._seed)
        obs = self._cast(obs)
        task = self._task(info)
        state = self.policy.initial_state(B)
        prev_action = tuple(np.zeros([B, *s.shape], s.dtype.as_numpy_dtype)
                            for s in self._action_space.action_specs())
        prev_reward = np.zeros([B], np.float32)
        first = np.ones([B], bool)
        placeholder = np.zeros([B], bool)  # this step holds an episode's final observation
        episode_return = np.zeros([B], np.float64)
        episode_length = np.zeros([B], np.int64)
        steps_taken = 0
        if self._fetcher is not None:
            self._fetcher.fetch()  # blocks until the learner has published once
            self.policy.refresh()

        while not stop():
            action, params, log_prob, baseline, new_state = self.policy(
                obs, prev_action, prev_reward, first, state, task)
            if steps_taken < self._random_steps:  # uniform over the allowed actions
                action, log_prob = self._action_space.sample_uniform(
                    B, self._rng, obs[ACTION_MASK] if self._core.masked else None)
            steps_taken += B
            next_obs, reward, terminated, truncated, info = self._envs.step(
                self._action_space.to_env(action))
            real = ~placeholder
            discount = np.where(real & terminated, 0.0, 1.0).astype(np.float32)
            reward = np.where(real, reward, 0.0).astype(np.float32)
            discount = np.where(real, discount, 0.0).astype(np.float32)
            # Vector rewards (launch.environments.factory): `reward` is their weighted sum.
            stored_reward = (np.where(real[:, None], info['reward_vector'], 0.0).astype(np.float32)
                             if self._vector_reward else reward)
            # Episode bookkeeping first: a learner that sees the steps (and may end the
            # run at its budget) sees the episodes they finished.
            episode_return += reward
            episode_length += real
            done = real & (terminated | truncated)
            if done.any():
                for b in np.flatnonzero(done):
                    self.stats.add_episode(float(episode_return[b]), int(episode_length[b]))
                episode_return[done] = 0.0
                episode_length[done] = 0
            # Counted before the write: a learner that sees the data sees the steps.
            # An action repeat (`launch.environments.action_repeat`) reports the frames each took.
            decisions = int(real.sum())
            frames = (int(np.where(real, info[FRAMES], 0).sum()) if FRAMES in info
                      else decisions)
            self.stats.add_steps(frames, decisions)
            self.stats.info.add(info)
            written = False
            if self._writer is not None:
                written = self._writer.append(Step(
                    observation=obs, action=action, reward=stored_reward, discount=discount,
                    first=first, prev_action=prev_action, prev_reward=prev_reward,
                    behaviour_params=params, behaviour_log_prob=log_prob,
                    behaviour_baseline=baseline, task=task), state)
                if written:
                    held = self._after_write(flush_timeout_ms, stop)
            # The placeholder step's env.step resets the environment: next is `first`.
            first = placeholder
            placeholder = done
            obs = self._cast(next_obs)
            task = self._task(info)
            state = new_state
            prev_action, prev_reward = action, reward
            if written:
                yield held

    def _task(self, info: dict) -> np.ndarray:
        """Each environment's task `[B]` int32: a task sequence's `info[TASK]`
        (`launch.environments.task_sequence`), else 0."""
        if TASK in info:
            return np.asarray(info[TASK], np.int32)
        return self._no_task

    def _after_write(self, flush_timeout_ms: int, stop: Callable[[], bool]) -> bool:
        """Waits for the queue's rate limiter (the learner) without hanging past stop();
        True when it held the round back for `flush_timeout_ms` or more."""
        held = False
        while True:
            try:
                self._writer.flush(timeout_ms=flush_timeout_ms)
                break
            except reverb.errors.DeadlineExceededError:
                held = True
                if stop():
                    return held
        # Not once stopped: the run stops the server next, and a Reverb sample that
        # began first would never return (it cannot time out).
        if self._fetcher is not None and not stop() and self._fetcher.fetch(timeout_s=0):
            self.policy.refresh()
        return held
