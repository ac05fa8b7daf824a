"""Networks of a user's own, as docs/networks.md shows them: each function is a
factory the command line names as `--torso=network_examples.my_networks:mlp` (the checkout
on the Python path) and the Python API takes as `train(..., torso=mlp)`.

A torso factory takes the observation space (and its `--torso_kwargs`) and returns a
Keras layer or model, or a Sonnet module, mapping a batch of observations
`[N, ...]` to features `[N, F]`; a memory factory takes its `--memory_kwargs` and
returns a Keras RNN cell or an `snt.RNNCore`.
"""

import sonnet as snt
import tensorflow as tf


# A Keras Sequential MLP for vector observations.
def mlp(observation_space, units=64, layers=2):
    return tf.keras.Sequential(
        [tf.keras.layers.Dense(units, activation='relu') for _ in range(layers)])


# A Keras Functional CNN for images ([N, H, W, C] uint8, as the environment gives them).
def cnn(observation_space, channels=16, units=128):
    images = tf.keras.Input(shape=observation_space.shape, dtype=tf.uint8)
    x = tf.keras.layers.Rescaling(1 / 255)(images)
    x = tf.keras.layers.Conv2D(channels, 3, activation='relu')(x)
    x = tf.keras.layers.Flatten()(x)
    features = tf.keras.layers.Dense(units, activation='relu')(x)
    return tf.keras.Model(images, features)


# A Dict observation: one Keras layer per key, and a combiner of their features.
def per_key(observation_space, units=32):
    layers = {key: tf.keras.Sequential([tf.keras.layers.Flatten(),
                                        tf.keras.layers.Dense(units, activation='relu')])
              for key in observation_space.spaces}
    combiner = tf.keras.Sequential([tf.keras.layers.Concatenate(),
                                    tf.keras.layers.Dense(64, activation='relu')])
    return layers, combiner


# A Sonnet module.
def sonnet_mlp(observation_space, units=64):
    return snt.Sequential([snt.Flatten(), snt.nets.MLP([units, units], activate_final=True)])


# A Keras GRU cell as the memory, in the LSTM's place.
def gru(units=64):
    return tf.keras.layers.GRUCell(units)


# A Keras LSTM cell: two state tensors (h, c), stored and replayed as the LSTM's are.
def lstm(units=64):
    return tf.keras.layers.LSTMCell(units)
