"""The reward signals' models (`agents.signals`): ICM (curiosity) and GAIL's
discriminator, on observations scaled to [-1, 1] where their bounds allow."""

from typing import Any, Tuple

import gymnasium as gym
import numpy as np
import sonnet as snt
import tensorflow as tf

from reverb_agents.agents.signals.losses import icm_losses
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import ObservationTorso

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
