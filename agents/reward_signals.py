"""Reward signals and demonstrations: what a learner adds to the environment's reward.

ML-Agents trains on a set of *reward signals*, each one component of the
reward with its own strength and discount. Here (CLEAR and SAC):

- `extrinsic`: the environment's reward as the agent transforms it, times
  `extrinsic_strength`, discounted by the agent's own gamma;
- `curiosity`: ICM (Pathak et al. 2017). An encoder phi, an inverse model
  (the action from phi(s), phi(s')) and a forward model (phi(s') from phi(s)
  and the action); the reward is the forward model's error
  0.5 * ||f(phi(s), a) - phi(s')||^2, times `curiosity_strength` (annealed
  linearly to 0 over `curiosity_steps` learner steps, constant with 0);
- `gail`: GAIL (Ho & Ermon 2016). A discriminator D(s[, a]), the probability
  that a step is a demonstration's, trained on demonstration steps against the
  policy's with a gradient penalty; the reward is -log(1 - D), times
  `gail_strength`.

Intrinsic rewards are computed at learning time from the batch's (s, a, s'),
by the models as they are before this step updates them, so they stay
current for replayed data too. Each component has its own value output and
its own discount; the learner's targets are per component and its policy
follows the sum of the components' advantages (ML-Agents' value heads per
signal). The models train inside the learner's `tf.function` step with their
own Adam optimisers.

Whether a termination ends a signal's return is per signal (`curiosity_episodic`
off, RND's non-episodic returns; `gail_episodic` on); `curiosity_clip` bounds
a step's curiosity reward by a multiple of its running RMS (taken over the
bounded rewards, so one unpredictable transition, a wall hit in MountainCar,
neither dominates the return nor mutes curiosity for hundreds of updates);
`curiosity_normalize` divides the curiosity reward by that RMS; `gail_reward='logit'` is
AIRL's log D - log(1 - D). Why each exists: docs/reward-signals.md.

Behavioural cloning (`bc_demos`, `bc_strength`, `bc_steps`,
`bc_pretrain_steps`): the cloning loss of demonstrated actions under the
policy (`cloning_losses`: -log pi for discrete leaves, the squared error of
the mode for continuous ones), added to the learner's loss with a weight annealed
linearly to 0 over `bc_steps` learner steps (constant with 0), and/or
`bc_pretrain_steps` steps on the demonstrations alone before any actor acts.

Everything here belongs to the learner (its checkpoint holds the models and
their optimisers); the acting core, the actors and the exported policy never
see it. Demonstration files are `replay.demos`' format.
"""

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from reverb_agents.agents.configs import field, require
from reverb_agents.agents.optimizers import Adam
from reverb_agents.agents.slots import create_slots
from reverb_agents.networks.cores import CoreInputs, merge_time
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import ObservationTorso, observation_spec
from reverb_agents.replay import demos as demos_lib
from reverb_agents.replay import trajectory


SIGNALS = ('curiosity', 'gail')  # the intrinsic signals, in component order after extrinsic
CURIOSITY_METRICS = ('curiosity/forward_loss', 'curiosity/inverse_loss', 'curiosity/reward')
GAIL_METRICS = ('gail/loss', 'gail/gradient_penalty', 'gail/reward', 'gail/demo_estimate',
                'gail/policy_estimate')
BC_METRICS = ('bc/loss', 'bc/strength')
GAIL_REWARDS = ('positive', 'logit')
FORWARD_WEIGHT = 0.2  # ICM's beta: the forward model's share of the ICM loss (Pathak et al.)


@dataclasses.dataclass(frozen=True)
class SignalsConfig:
    extrinsic_strength: float = field(
        1.0, "weight of the environment's reward (0: learn from the other signals alone)")
    curiosity_strength: float = field(0.0, 'weight of the ICM curiosity reward (0: off)')
    curiosity_gamma: float = field(0.99, "the curiosity reward's discount")
    curiosity_encoding_size: int = field(64, "size of ICM's state encoding phi(s)")
    curiosity_learning_rate: float = field(3e-4, "Adam step size of ICM's models")
    curiosity_episodic: bool = field(
        False, "an episode's termination ends the curiosity return (ML-Agents); off: it "
        "bootstraps across it as across a time limit (RND's non-episodic returns)")
    curiosity_steps: int = field(0, 'learner steps over which curiosity_strength anneals '
                                 'linearly to 0 (0: constant)')
    curiosity_normalize: bool = field(
        False, 'divide the curiosity reward by a running RMS of it (as RND), so the strength '
        'is in units of typical novelty and stays meaningful as ICM learns')
    curiosity_clip: float = field(
        5.0, "a step's curiosity reward is at most this many running RMS of the (bounded) "
        'rewards before it (0: unbounded)')
    gail_strength: float = field(0.0, 'weight of the GAIL reward -log(1 - D) (0: off)')
    gail_gamma: float = field(0.99, "the GAIL reward's discount")
    gail_demos: str = field('', "demonstrations file (launch/record.py) for GAIL's "
                            "discriminator")
    gail_use_actions: bool = field(False, 'the discriminator sees (s, a) instead of s')
    gail_reward: str = field(
        'positive', "'positive': -log(1 - D) (GAIL's, always > 0: it also rewards merely "
        "surviving); 'logit': log D - log(1 - D) (AIRL's, < 0 where steps look like the "
        "policy's, no survival bias)")
    gail_episodic: bool = field(
        True, "an episode's termination ends the GAIL return (GAIL, ML-Agents); off: it "
        "bootstraps across it as across a time limit")
    gail_learning_rate: float = field(3e-4, "Adam step size of GAIL's discriminator")
    gail_gradient_penalty: float = field(10.0, "weight of the discriminator's gradient penalty")
    bc_demos: str = field('', 'demonstrations file (launch/record.py) for behavioural cloning')
    bc_strength: float = field(0.0, 'weight of the behavioural-cloning loss on demo batches')
    bc_steps: int = field(0, 'learner steps over which bc_strength anneals linearly to 0 '
                          '(0: constant)')
    bc_pretrain_steps: int = field(0, 'policy pre-training steps on the demonstrations alone, '
                                   'before any actor acts')
    signal_hidden_size: int = field(128, 'hidden units of the ICM and GAIL networks')

    def __post_init__(self):
        for name in ('extrinsic_strength', 'curiosity_strength', 'gail_strength',
                     'bc_strength'):
            value = getattr(self, name)
            require(value >= 0, f'{name} must be >= 0 (a signal strength), got {value}')
        require(self.gail_reward in GAIL_REWARDS,
                f'gail_reward must be one of {GAIL_REWARDS}, got {self.gail_reward!r}')
        for name in ('curiosity_gamma', 'gail_gamma'):
            value = getattr(self, name)
            require(0.0 <= value <= 1.0, f'{name} must be in [0, 1], got {value}')
        for name in ('curiosity_encoding_size', 'curiosity_learning_rate', 'gail_learning_rate',
                     'signal_hidden_size'):
            value = getattr(self, name)
            require(value > 0, f'{name} must be positive, got {value}')
        for name in ('gail_gradient_penalty', 'curiosity_steps', 'bc_steps',
                     'bc_pretrain_steps', 'curiosity_clip'):
            value = getattr(self, name)
            require(value >= 0, f'{name} must be >= 0, got {value}')
        require(bool(self.gail_strength) == bool(self.gail_demos),
                '--gail_strength > 0 needs --gail_demos=FILE, and --gail_demos needs '
                f'--gail_strength > 0 (got {self.gail_strength}, {self.gail_demos!r})')
        uses_bc = bool(self.bc_strength) or bool(self.bc_pretrain_steps)
        require(uses_bc == bool(self.bc_demos),
                '--bc_strength > 0 or --bc_pretrain_steps > 0 needs --bc_demos=FILE, and '
                '--bc_demos needs one of them')
        require(self.extrinsic_strength > 0 or self.intrinsic,
                'every reward signal is off: set --extrinsic_strength > 0, '
                '--curiosity_strength > 0 or --gail_strength > 0')

    @property
    def intrinsic(self) -> Tuple[str, ...]:
        """The intrinsic signals that are on, in component order (`SIGNALS`)."""
        return tuple(name for name in SIGNALS if getattr(self, f'{name}_strength') > 0)

    @property
    def uses_bc(self) -> bool:
        return bool(self.bc_demos)

    @property
    def gammas(self) -> Tuple[float, ...]:
        """The intrinsic components' discounts."""
        return tuple(getattr(self, f'{name}_gamma') for name in self.intrinsic)

    @property
    def episodic(self) -> Tuple[bool, ...]:
        """Whether a termination ends each intrinsic component's return."""
        return tuple(getattr(self, f'{name}_episodic') for name in self.intrinsic)

    @property
    def demo_files(self) -> Tuple[str, ...]:
        """The demonstration files the learner reads (checked against the environment)."""
        return tuple(path for path in (self.gail_demos, self.bc_demos) if path)

    def metric_names(self) -> Tuple[str, ...]:
        """The TensorBoard names the signals add to a learner step's metrics."""
        names = ()
        if 'curiosity' in self.intrinsic:
            names += CURIOSITY_METRICS
        if 'gail' in self.intrinsic:
            names += GAIL_METRICS
        if self.bc_strength:
            names += BC_METRICS
        return names


# --- pure losses -----------------------------------------------------------------------


def icm_losses(phi_next: tf.Tensor, predicted_next: tf.Tensor,
               inverse_log_prob: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """ICM's per-step losses: (forward error 0.5 * ||f - phi(s')||^2, inverse NLL) `[N]`.

    phi_next, predicted_next: `[N, E]` the encoding of s' and the forward model's
    prediction of it from (phi(s), a); inverse_log_prob: `[N]` log-probability of
    the taken action under the inverse model. The forward error is also the reward.
    """
    forward = 0.5 * tf.reduce_sum(tf.square(predicted_next - phi_next), -1)
    return forward, -inverse_log_prob


def gail_discriminator_loss(demo_logits: tf.Tensor, policy_logits: tf.Tensor,
                            policy_mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Binary cross-entropy `[]`: demonstrations `[M]` labelled 1, the policy's steps
    `[N]` 0 (D = sigmoid(logit) is the probability of a demonstration); each part is
    a mean, the policy's over `policy_mask`ed steps if given."""
    demo = tf.nn.sigmoid_cross_entropy_with_logits(tf.ones_like(demo_logits), demo_logits)
    policy = tf.nn.sigmoid_cross_entropy_with_logits(tf.zeros_like(policy_logits),
                                                     policy_logits)
    if policy_mask is None:
        policy_mask = tf.ones_like(policy)
    return (tf.reduce_mean(demo) + tf.reduce_sum(policy_mask * policy)
            / tf.maximum(tf.reduce_sum(policy_mask), 1.0))


def gail_reward(logits: tf.Tensor, kind: str = 'positive') -> tf.Tensor:
    """The reward of steps whose discriminator logits are `logits` (D = sigmoid(logits)).

    'positive': -log(1 - D), computed stably as softplus(logits); > 0, and larger the
    more a step looks like a demonstration's. Being > 0 it also pays for every step
    an episode lasts, whatever the step (the survival bias of Kostrikov et al. 2019).
    'logit': log D - log(1 - D) = logits (AIRL's form), negative where a step looks
    like the policy's rather than a demonstration's.
    """
    return tf.nn.softplus(logits) if kind == 'positive' else tf.identity(logits)


def bc_loss(per_step: tf.Tensor, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Behavioural cloning `[]`: the mean of per-step losses (`cloning_losses`) over
    `mask`ed steps if given."""
    if mask is None:
        return tf.reduce_mean(per_step)
    return tf.reduce_sum(mask * per_step) / tf.maximum(tf.reduce_sum(mask), 1.0)


def cloning_losses(action_space: ActionSpace, params: Tuple[tf.Tensor, ...],
                   actions: Tuple[tf.Tensor, ...]) -> tf.Tensor:
    """Per-step behavioural-cloning loss `[...]` of demonstrated `actions` under the
    policy's per-leaf `params`, summed over leaves: -log pi(a) for a discrete leaf, the
    squared error of the policy's most likely action for a continuous one (ML-Agents'
    choice; a demonstrator's saturated actions would make a squashed Gaussian's
    likelihood unbounded)."""
    total = 0.0
    for leaf, p, a in zip(action_space.leaves, params, actions):
        if leaf.discrete:
            total += -leaf.log_prob(p, a)
        else:
            total += tf.reduce_sum(tf.square(leaf.mode(p) - a), -1)
    return total


def component_targets(targets: Callable[..., Any], log_rhos: tf.Tensor, discounts: tf.Tensor,
                      rewards: tf.Tensor, values: tf.Tensor, bootstrap_value: tf.Tensor
                      ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Per-component value targets and advantages, (vs, pg_advantages) `[T, B, k]`.

    `targets(log_rhos, discounts, rewards, values, bootstrap_value)` is a `[T, B]`
    target function returning `.vs` and `.pg_advantages` (V-trace, GAE); each of
    the k components (discounts, rewards, values `[T, B, k]`, bootstrap_value
    `[B, k]`) runs through it with the same `log_rhos` `[T, B]`, as k more columns.
    """
    shape = tf.shape(values)
    k = values.shape[-1]
    flat = lambda x: tf.reshape(x, [shape[0], -1])  # noqa: E731 - [T, B, k] -> [T, B * k]
    out = targets(tf.repeat(log_rhos, k, axis=1), flat(discounts), flat(rewards), flat(values),
                  tf.reshape(bootstrap_value, [-1]))
    return tf.reshape(out.vs, shape), tf.reshape(out.pg_advantages, shape)


def component_discounts(discount: tf.Tensor, gammas: Any,
                        episodic: Tuple[bool, ...]) -> tf.Tensor:
    """The intrinsic components' discounts `[..., n]`: each gamma (`[n]`) times the
    episode's `discount` `[...]` (0 at a termination) where that component is
    `episodic`, else times 1, so a termination bootstraps like a time limit
    (non-episodic returns, as RND's)."""
    episodic = tf.constant(episodic, tf.bool)
    discount = tf.cast(discount, tf.float32)[..., None]
    return tf.where(episodic, discount, tf.ones_like(discount)) * gammas


def bounded_curiosity(reward: tf.Tensor, clip: float, mean_square: tf.Tensor,
                      updates: tf.Tensor) -> tf.Tensor:
    """Per-step curiosity rewards `[N]` capped at `clip` times the running RMS
    `sqrt(mean_square)` of earlier (bounded) rewards; unchanged with `clip` 0 or
    before the first update (`updates` 0: no RMS yet)."""
    if not clip:
        return reward
    bound = tf.where(updates > 0, clip * tf.sqrt(mean_square), float('inf'))
    return tf.minimum(reward, bound)


def linear_decay(strength: float, steps: int, step: tf.Tensor) -> tf.Tensor:
    """`strength` annealed linearly to 0 over `steps` (constant when `steps` is 0)."""
    if steps <= 0:
        return tf.constant(strength, tf.float32)
    fraction = tf.minimum(tf.cast(step, tf.float32) / float(steps), 1.0)
    return strength * (1.0 - fraction)


# --- models ----------------------------------------------------------------------------


def scale_observation(space: gym.Space, observation: Any) -> Any:
    """A `Box` with finite bounds mapped to [-1, 1] (MountainCar's velocity spans
    0.14); any other observation as it is. The signal models see this."""
    if not isinstance(space, gym.spaces.Box) or not np.all(np.isfinite(space.low)) \
            or not np.all(np.isfinite(space.high)) or np.any(space.high <= space.low):
        return observation
    low = tf.constant(space.low, tf.float32)
    high = tf.constant(space.high, tf.float32)
    return 2.0 * (tf.cast(observation, tf.float32) - low) / (high - low) - 1.0


class ICM(snt.Module):
    """Encoder, inverse and forward models (Pathak et al. 2017) over flat batches `[N]`."""

    def __init__(self, observation_space: gym.Space, action_space: ActionSpace,
                 encoding_size: int, hidden_size: int):
        super().__init__(name='icm')
        self._observation_space = observation_space
        self._action_space = action_space
        # The torso's layers are Linear + relu; the encoding is linear.
        self.encoder = snt.Sequential([ObservationTorso(observation_space, 'auto', (hidden_size,)),
                                       snt.Linear(encoding_size)])
        self.inverse_model = snt.nets.MLP([hidden_size, sum(action_space.param_sizes)])
        self.forward_model = snt.nets.MLP([hidden_size, encoding_size])

    def encode(self, observation: Any) -> tf.Tensor:
        return self.encoder(scale_observation(self._observation_space, observation))

    def losses(self, observation: Any, action: Tuple[tf.Tensor, ...],
               next_observation: Any) -> Tuple[tf.Tensor, tf.Tensor]:
        """(forward error, inverse NLL) `[N]` for steps (s `[N, ...]`, a, s')."""
        phi = self.encode(observation)
        phi_next = self.encode(next_observation)
        inverse_params = self._action_space.split_params(
            self.inverse_model(tf.concat([phi, phi_next], -1)))
        predicted = self.forward_model(tf.concat([phi, self._action_space.encode(action)], -1))
        return icm_losses(phi_next, predicted,
                          self._action_space.log_prob(inverse_params, action))


class Discriminator(snt.Module):
    """GAIL's D(s[, a]) as a logit `[N]`."""

    def __init__(self, observation_space: gym.Space, action_space: ActionSpace,
                 use_actions: bool, hidden_size: int):
        super().__init__(name='gail_discriminator')
        self._observation_space = observation_space
        self._action_space = action_space
        self._use_actions = use_actions
        self.torso = ObservationTorso(observation_space, 'auto', (hidden_size,))
        self.head = snt.nets.MLP([hidden_size, 1], activate_final=False)

    def inputs(self, observation: Any, action: Tuple[tf.Tensor, ...]) -> Tuple[Any, tf.Tensor]:
        """What D reads: (scaled observation, encoded action, or `[N, 0]` without actions)."""
        encoded = self._action_space.encode(action)
        if not self._use_actions:
            encoded = encoded[:, :0]
        return scale_observation(self._observation_space, observation), encoded

    def logits(self, inputs: Tuple[Any, tf.Tensor]) -> tf.Tensor:
        observation, encoded_action = inputs
        features = self.torso(observation)  # Linear + relu layers
        return self.head(tf.concat([features, encoded_action], -1))[:, 0]

    def gradient_penalty(self, demo: Tuple[Any, tf.Tensor],
                         policy: Tuple[Any, tf.Tensor]) -> tf.Tensor:
        """(||grad D(x)|| - 1)^2 at random interpolations x of demo and policy inputs
        (float leaves; others are the policy's), as ML-Agents' GAIL."""
        n = tf.shape(policy[1])[0]
        alpha = tf.random.uniform([n], dtype=tf.float32)

        def mix(d, p):
            if not p.dtype.is_floating:
                return p
            a = tf.reshape(alpha, tf.concat([[n], tf.ones([tf.rank(p) - 1], tf.int32)], 0))
            return a * tf.cast(d, p.dtype) + (1.0 - a) * p

        mixed = tf.nest.map_structure(mix, demo, policy)
        leaves = [x for x in tf.nest.flatten(mixed) if x.dtype.is_floating]
        with tf.GradientTape() as tape:
            tape.watch(leaves)
            logits = self.logits(mixed)
        gradients = tape.gradient(logits, leaves, unconnected_gradients='zero')
        squared = tf.add_n([tf.reduce_sum(tf.reshape(tf.square(g), [n, -1]), -1)
                            for g in gradients])
        return tf.reduce_mean(tf.square(tf.sqrt(squared + 1e-12) - 1.0))


class DemoBuffer(tf.Module):
    """Demonstration steps (`replay.demos.transitions`) as constants; uniform
    samples inside a traced step."""

    def __init__(self, path: str, action_space: ActionSpace, observation_dtype: tf.DType):
        super().__init__(name='demos')
        steps = demos_lib.transitions(demos_lib.load_demos(path))
        self.size = int(len(steps['first']))
        self._observation = tf.constant(steps['observation'], observation_dtype)
        self._action = tuple(tf.constant(a) for a in action_space.from_env(steps['action']))
        self._prev_action = tuple(tf.constant(a)
                                  for a in action_space.from_env(steps['prev_action']))
        self._prev_reward = tf.constant(steps['prev_reward'], tf.float32)
        self._first = tf.constant(steps['first'], tf.bool)

    def sample(self, n: int) -> Tuple[tf.Tensor, Tuple[tf.Tensor, ...]]:
        """`n` uniformly drawn steps: (observation `[n, ...]`, per-leaf action `[n, ...]`)."""
        index = tf.random.uniform([n], 0, self.size, dtype=tf.int32)
        return (tf.gather(self._observation, index),
                tuple(tf.gather(a, index) for a in self._action))

    def sample_sequences(self, length: int, n: int) -> Dict[str, Any]:
        """`n` windows of `length` consecutive steps, time-major `[length, n, ...]`:
        observation, action, prev_action, prev_reward, first (true at each window's
        start too, so a recurrent core starts from its initial state there)."""
        length = min(length, self.size)
        start = tf.random.uniform([n], 0, self.size - length + 1, dtype=tf.int32)
        index = tf.range(length)[:, None] + start[None, :]  # [length, n]
        gather = lambda x: tf.gather(x, index)  # noqa: E731
        first = tf.logical_or(gather(self._first), tf.range(length)[:, None] == 0)
        return {'observation': gather(self._observation),
                'action': tuple(gather(a) for a in self._action),
                'prev_action': tuple(gather(a) for a in self._prev_action),
                'prev_reward': gather(self._prev_reward), 'first': first}


def zeros_like_specs(observation_space: gym.Space, action_space: ActionSpace
                     ) -> Tuple[Any, Tuple[tf.Tensor, ...]]:
    """A batch of one zero observation and action (to build models before a restore)."""
    return (trajectory.zeros(observation_spec(observation_space), (1,)),
            trajectory.zeros(action_space.action_specs(), (1,)))


def demo_cloning_loss(demos: DemoBuffer, core: Any, action_space: ActionSpace, length: int,
                      n: int) -> tf.Tensor:
    """Behavioural cloning `[]` on `n` windows of `length` demonstration steps: `core`
    (an `ActorCriticCore`) unrolled over them from its initial state, the mean
    `cloning_losses` of the demonstrated actions under its policy."""
    demo = demos.sample_sequences(length, n)
    inputs = CoreInputs(demo['observation'], demo['prev_action'], demo['prev_reward'],
                        demo['first'])
    outputs, _ = core.unroll(inputs, core.initial_state(n))
    return bc_loss(cloning_losses(action_space, outputs.policy_params, demo['action']))


def _flat(x: Any) -> Any:
    """[T, B, ...] -> [T * B, ...] for every leaf of a nest."""
    return tf.nest.map_structure(merge_time, x)


class RewardSignals(snt.Module):
    """The intrinsic signals' models, optimisers and demonstrations of one learner."""

    def __init__(self, config: SignalsConfig, observation_space: gym.Space,
                 action_space: ActionSpace, observation_dtype: tf.DType = tf.float32):
        super().__init__(name='reward_signals')
        self.config = config
        self.names = config.intrinsic
        if 'curiosity' in self.names:
            self.curiosity = ICM(observation_space, action_space, config.curiosity_encoding_size,
                                 config.signal_hidden_size)
            self.curiosity_optimizer = Adam(config.curiosity_learning_rate)
            # The running mean of the squared (bounded) forward error: `curiosity_clip`'s
            # and `curiosity_normalize`'s scale.
            self.curiosity_mean_square = tf.Variable(0.0, trainable=False,
                                                     name='curiosity_mean_square')
            self.curiosity_updates = tf.Variable(0.0, trainable=False, name='curiosity_updates')
        if 'gail' in self.names:
            self.gail = Discriminator(observation_space, action_space, config.gail_use_actions,
                                      config.signal_hidden_size)
            self.gail_optimizer = Adam(config.gail_learning_rate)
            self.gail_demos = DemoBuffer(config.gail_demos, action_space, observation_dtype)
        self.bc_demos = (DemoBuffer(config.bc_demos, action_space, observation_dtype)
                         if config.uses_bc else None)
        self.pretrained_steps = tf.Variable(0, dtype=tf.int64, trainable=False,
                                            name='pretrained_steps')

    def pretrain(self, step: Callable[[], tf.Tensor], steps: int) -> Optional[float]:
        """Runs `step()` (one behavioural-cloning update) until `steps` have run in
        all, counting in the checkpointed `pretrained_steps`; the last loss, or None."""
        loss = None
        while int(self.pretrained_steps.numpy()) < steps:
            loss = float(step().numpy())
            self.pretrained_steps.assign_add(1)
        return loss

    @property
    def strengths(self) -> Tuple[float, ...]:
        return tuple(getattr(self.config, f'{name}_strength') for name in self.names)

    def create_variables(self, observation: Any, action: Tuple[tf.Tensor, ...]) -> None:
        """Builds every model on a batch `[N, ...]` (before a checkpoint restore)."""
        if 'curiosity' in self.names:
            self.curiosity.losses(observation, action, observation)
            create_slots(self.curiosity_optimizer, self.curiosity.trainable_variables)
        if 'gail' in self.names:
            self.gail.logits(self.gail.inputs(observation, action))
            create_slots(self.gail_optimizer, self.gail.trainable_variables)

    def _update_mean_square(self, reward: tf.Tensor, mask: tf.Tensor, count: tf.Tensor
                            ) -> tf.Tensor:
        """Updates and returns the running mean of the squared curiosity reward: an
        exponential average of the batches' means (weight 8 / (8 + u) after u updates,
        at least 0.01, so the first batch sets it and it follows ICM as it learns)."""
        batch = tf.reduce_sum(mask * tf.square(reward)) / count
        rate = tf.maximum(8.0 / (8.0 + self.curiosity_updates), 0.01)
        self.curiosity_updates.assign_add(1.0)
        return self.curiosity_mean_square.assign_add(rate * (batch - self.curiosity_mean_square))

    def rewards_and_train(self, observation: Any, action: Tuple[tf.Tensor, ...],
                          mask: tf.Tensor, step: Union[int, tf.Tensor] = 0
                          ) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """Intrinsic rewards `[T, B, n]` (strength-weighted, no gradient) for the
        time-major steps `observation[:-1]`, `action[:-1]` -> `observation[1:]`
        (`[T + 1, B, ...]` in, `mask` `[T, B]` marks real steps), from the models as
        they are; then one update of each model on the masked steps. Metrics by name.
        `step` (the learner's) anneals the curiosity strength (`curiosity_steps`).
        """
        obs = _flat(tf.nest.map_structure(lambda x: x[:-1], observation))
        next_obs = _flat(tf.nest.map_structure(lambda x: x[1:], observation))
        act = _flat(tf.nest.map_structure(lambda x: x[:-1], action))
        flat_mask = tf.reshape(mask, [-1])
        count = tf.maximum(tf.reduce_sum(flat_mask), 1.0)
        rewards, metrics = [], {}
        if 'curiosity' in self.names:
            variables = self.curiosity.trainable_variables
            with tf.GradientTape() as tape:
                forward, inverse = self.curiosity.losses(obs, act, next_obs)
                forward_loss = tf.reduce_sum(flat_mask * forward) / count
                inverse_loss = tf.reduce_sum(flat_mask * inverse) / count
                loss = FORWARD_WEIGHT * forward_loss + (1.0 - FORWARD_WEIGHT) * inverse_loss
            self.curiosity_optimizer.apply(tape.gradient(loss, variables), variables)
            reward = bounded_curiosity(tf.stop_gradient(forward), self.config.curiosity_clip,
                                       self.curiosity_mean_square, self.curiosity_updates)
            mean_square = self._update_mean_square(reward, flat_mask, count)
            if self.config.curiosity_normalize:
                reward = reward / tf.sqrt(mean_square + 1e-8)
            reward = reward * linear_decay(self.config.curiosity_strength,
                                           self.config.curiosity_steps, step)
            rewards.append(reward)
            metrics.update({'curiosity/forward_loss': forward_loss,
                            'curiosity/inverse_loss': inverse_loss,
                            'curiosity/reward': tf.reduce_sum(flat_mask * reward) / count})
        if 'gail' in self.names:
            n = tf.shape(flat_mask)[0]
            policy = self.gail.inputs(obs, act)
            demo = self.gail.inputs(*self.gail_demos.sample(n))
            variables = self.gail.trainable_variables
            with tf.GradientTape() as tape:
                policy_logits = self.gail.logits(policy)
                demo_logits = self.gail.logits(demo)
                discriminator_loss = gail_discriminator_loss(demo_logits, policy_logits,
                                                             flat_mask)
                penalty = self.gail.gradient_penalty(demo, policy)
                loss = discriminator_loss + self.config.gail_gradient_penalty * penalty
            self.gail_optimizer.apply(tape.gradient(loss, variables), variables)
            reward = tf.stop_gradient(gail_reward(policy_logits, self.config.gail_reward)
                                      ) * self.config.gail_strength
            rewards.append(reward)
            metrics.update({
                'gail/loss': discriminator_loss, 'gail/gradient_penalty': penalty,
                'gail/reward': tf.reduce_sum(flat_mask * reward) / count,
                'gail/demo_estimate': tf.reduce_mean(tf.sigmoid(demo_logits)),
                'gail/policy_estimate': tf.reduce_sum(flat_mask * tf.sigmoid(policy_logits))
                                        / count})
        stacked = tf.stack(rewards, -1)  # [T * B, n]
        return tf.reshape(stacked, tf.concat([tf.shape(mask), [len(rewards)]], 0)), metrics
