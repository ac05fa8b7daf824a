"""Observation torsos: Sonnet 2 modules mapping observations `[N, ...]` to features `[N, F]`.

All torsos accept a dynamic batch dimension and work inside `tf.function`.
Image torsos take `[N, H, W, C]`; `uint8` images are scaled to `[0, 1]` inside the
network, float images are used as they are.
"""
from typing import Callable, Optional, Sequence

import numpy as np
import sonnet as snt
import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor]

_IMAGE_KINDS = ("nature_cnn", "impala_resnet")
_KINDS = ("auto", "mlp") + _IMAGE_KINDS


def _image_to_float(images: tf.Tensor) -> tf.Tensor:
    """Casts `[N, H, W, C]` images to float32, scaling uint8 by 1/255."""
    if images.dtype == tf.uint8:
        return tf.cast(images, tf.float32) / 255.0
    return tf.cast(images, tf.float32)


class MLP(snt.Module):
    """Flattens `[N, ...]` observations to `[N, D]` and applies Linear+activation layers.

    Output: `[N, hidden_sizes[-1]]` (or `[N, D]` if `hidden_sizes` is empty).
    """

    def __init__(self,
                 hidden_sizes: Sequence[int] = (64, 64),
                 activation: Activation = tf.nn.relu,
                 name: Optional[str] = None):
        super().__init__(name=name)
        self._activation = activation
        self._flat = snt.Flatten()  # Not `_flatten`: that would shadow tf.Module._flatten.
        self._layers = [
            snt.Linear(size, w_init=snt.initializers.Orthogonal(gain=np.sqrt(2.0)),
                       name=f"linear_{i}")
            for i, size in enumerate(hidden_sizes)
        ]

    @property
    def layers(self) -> list:
        return list(self._layers)

    @property
    def activation(self) -> Activation:
        return self._activation

    def __call__(self, observations: tf.Tensor) -> tf.Tensor:
        x = tf.cast(observations, tf.float32)
        if x.shape.rank == 1:  # [N] scalar observations -> [N, 1].
            x = x[:, None]
        x = self._flat(x)
        for layer in self._layers:
            x = self._activation(layer(x))
        return x


class NatureCNN(snt.Module):
    """Nature-DQN torso: `[N, H, W, C]` -> `[N, 512]`.

    Conv 32 8x8 s4, conv 64 4x4 s2, conv 64 3x3 s1 (VALID, ReLU), flatten, Linear 512, ReLU.
    """

    def __init__(self, name: Optional[str] = None):
        super().__init__(name=name)
        self._convs = [
            snt.Conv2D(32, 8, stride=4, padding="VALID", name="conv_0"),
            snt.Conv2D(64, 4, stride=2, padding="VALID", name="conv_1"),
            snt.Conv2D(64, 3, stride=1, padding="VALID", name="conv_2"),
        ]
        self._flat = snt.Flatten()
        self._linear = snt.Linear(512, name="linear")

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        x = _image_to_float(images)
        for conv in self._convs:
            x = tf.nn.relu(conv(x))
        return tf.nn.relu(self._linear(self._flat(x)))


class _ResidualBlock(snt.Module):
    """relu -> conv 3x3 -> relu -> conv 3x3, plus the input: `[N, H, W, C]` -> same shape."""

    def __init__(self, channels: int, name: Optional[str] = None):
        super().__init__(name=name)
        self._conv_0 = snt.Conv2D(channels, 3, padding="SAME", name="conv_0")
        self._conv_1 = snt.Conv2D(channels, 3, padding="SAME", name="conv_1")

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        y = self._conv_0(tf.nn.relu(x))
        y = self._conv_1(tf.nn.relu(y))
        return x + y


class ImpalaResNet(snt.Module):
    """IMPALA deep ResNet torso: `[N, H, W, C]` -> `[N, output_size]`.

    Per section: conv 3x3, max-pool 3x3 stride 2 (SAME), `num_blocks` residual blocks.
    Then ReLU, flatten, Linear `output_size`, ReLU.
    """

    def __init__(self,
                 channels: Sequence[int] = (16, 32, 32),
                 num_blocks: int = 2,
                 output_size: int = 256,
                 name: Optional[str] = None):
        super().__init__(name=name)
        self._sections = []
        for i, c in enumerate(channels):
            conv = snt.Conv2D(c, 3, padding="SAME", name=f"section_{i}_conv")
            blocks = [_ResidualBlock(c, name=f"section_{i}_block_{j}")
                      for j in range(num_blocks)]
            self._sections.append((conv, blocks))
        self._flat = snt.Flatten()
        self._linear = snt.Linear(output_size, name="linear")

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        x = _image_to_float(images)
        for conv, blocks in self._sections:
            x = tf.nn.max_pool2d(conv(x), ksize=3, strides=2, padding="SAME")
            for block in blocks:
                x = block(x)
        x = self._flat(tf.nn.relu(x))
        return tf.nn.relu(self._linear(x))


def make_torso(observation_shape: Sequence[int],
               observation_dtype: tf.dtypes.DType,
               kind: str = "auto",
               **kwargs) -> snt.Module:
    """Builds a torso for observations of per-step shape `observation_shape` (no batch dim).

    `kind='auto'` picks `NatureCNN` for rank-3 `[H, W, C]` observations and `MLP` otherwise;
    `'mlp'`, `'nature_cnn'` and `'impala_resnet'` choose explicitly. `kwargs` go to the module.
    `observation_dtype` is checked to be a valid dtype (scaling happens inside the module).
    """
    tf.as_dtype(observation_dtype)  # Raises TypeError on a nonsense dtype.
    rank = len(tuple(observation_shape))
    kind = resolve_kind(kind, rank)
    if kind in _IMAGE_KINDS and rank != 3:
        raise ValueError(f"Torso {kind!r} needs a rank-3 [H, W, C] observation, "
                         f"got shape {tuple(observation_shape)}.")
    if kind == "mlp":
        return MLP(**kwargs)
    if kind == "nature_cnn":
        return NatureCNN(**kwargs)
    return ImpalaResNet(**kwargs)


def resolve_kind(kind: str, rank: int) -> str:
    """The torso `make_torso(kind=kind)` builds for rank-`rank` observations:
    'auto' becomes 'nature_cnn' (rank 3) or 'mlp'; other kinds are checked and kept."""
    if kind not in _KINDS:
        raise ValueError(f"Unknown torso kind {kind!r}; expected one of {_KINDS}.")
    if kind == "auto":
        return "nature_cnn" if rank == 3 else "mlp"
    return kind
