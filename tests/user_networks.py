"""Factories of networks a user gets wrong, for the checks of `networks.user`: each is
named from the command line as `--torso=tests.user_networks:<name>` (the checkout on
the path, as for `tests.envs`)."""

import sonnet as snt
import tensorflow as tf

NOT_A_FUNCTION = 3


def raises(observation_space):
    raise RuntimeError('no GPU for this torso')


def not_a_layer(observation_space):
    return 'dense'


def flat_output(observation_space):
    """Features [N] instead of [N, F]."""
    return tf.keras.Sequential([tf.keras.layers.Dense(1), tf.keras.layers.Flatten(),
                                tf.keras.layers.Lambda(lambda x: x[:, 0])])


def integer_output(observation_space):
    return tf.keras.layers.Lambda(lambda x: tf.cast(tf.reshape(x, [tf.shape(x)[0], -1]), tf.int32))


def no_variables(observation_space):
    return tf.keras.layers.Flatten()


def dropout(observation_space):
    return tf.keras.Sequential([tf.keras.layers.Dense(16), tf.keras.layers.Dropout(0.1)])


def regularized(observation_space):
    return tf.keras.layers.Dense(16, kernel_regularizer='l2')


def rnn_layer(units=8):
    return tf.keras.layers.GRU(units)


def no_state(units=8):
    return tf.keras.layers.Dense(units)


def compiled(observation_space):
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation='relu')])
    model.compile(optimizer='sgd', loss='mse')
    return model


def sonnet_lstm(units=8):
    return snt.LSTM(units)


def stacked(units=8):
    """Two Keras cells, one with two state tensors: a nested `state_size`."""
    return tf.keras.layers.StackedRNNCells([tf.keras.layers.GRUCell(units),
                                            tf.keras.layers.LSTMCell(units)])
