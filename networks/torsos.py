"""Observation torsos: Sonnet 2 modules mapping observations `[N, ...]` to features `[N, F]`.

All torsos accept a dynamic batch dimension and work inside `tf.function`.
Image torsos take `[N, H, W, C]`; `uint8` images are scaled to `[0, 1]` inside the
network, float images are used as they are. The convolution-stack torsos
(`NatureCNN`, `SimpleVisualEncoder`: `ConvTorso`) use VALID padding, so each has
a smallest image it accepts (`ConvTorso.min_image_size`); `make_torso` refuses a
smaller one with `ImageTooSmallError` instead of failing inside the convolution.

Precision (`set_precision`, a process-wide setting as Keras' mixed-precision
policy, read when a function is traced): 'bfloat16' computes a `ConvTorso`'s
convolutions and linear layer in bfloat16 from float32 weights (checkpoints,
optimiser and the numpy mirror unchanged), features and gradients back in
float32; on CPUs with bfloat16 matrix units (AMX, AVX512-BF16) a Nature CNN's
learner step takes about half the time (docs/benchmarks.md#pixels-minatar-and-atari).
"""
import contextlib
from typing import Callable, Iterator, Optional, Sequence, Tuple

import numpy as np
import sonnet as snt
import tensorflow as tf

Activation = Callable[[tf.Tensor], tf.Tensor]

IMAGE_KINDS = ("nature_cnn", "impala_resnet", "simple", "minatar")
# Short names a user may type: `--torso=nature` is `nature_cnn`, `--torso=impala` `impala_resnet`.
ALIASES = {"nature": "nature_cnn", "impala": "impala_resnet"}
KINDS = ("auto", "mlp") + IMAGE_KINDS + tuple(ALIASES)

ConvLayer = Tuple[int, int, int]  # (output channels, square kernel size, stride)
PRECISIONS = ("float32", "bfloat16")
_PRECISION = ["float32"]


def set_precision(precision: str) -> None:
    """The compute precision of `ConvTorso`s traced from now on (module doc)."""
    if precision not in PRECISIONS:
        raise ValueError(f"torso precision must be one of {PRECISIONS}, got {precision!r}")
    _PRECISION[0] = precision


def precision() -> str:
    return _PRECISION[0]


@contextlib.contextmanager
def precision_scope(precision: str) -> Iterator[None]:
    """`set_precision` inside the block only (an export traces its policy in float32)."""
    before = _PRECISION[0]
    set_precision(precision)
    try:
        yield
    finally:
        _PRECISION[0] = before


class ImageTooSmallError(ValueError):
    """An image smaller than an image torso's convolutions need."""


def leaky_relu(x: tf.Tensor) -> tf.Tensor:
    """LeakyReLU with slope 0.01 for x < 0: PyTorch's default (`nn.LeakyReLU()`, which
    ML-Agents' encoders use), not `tf.nn.leaky_relu`'s default of 0.2."""
    return tf.nn.leaky_relu(x, alpha=0.01)


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


class ConvTorso(snt.Module):
    """A stack of VALID convolutions, flatten, one Linear, each followed by `activation`:
    `[N, H, W, C]` -> `[N, output_size]`.

    The base of the fixed architectures below; `networks.numpy_core` mirrors it from
    `conv_layers`, the variables of `convs` and `linear`, and `activation`.
    """

    def __init__(self,
                 conv_layers: Sequence[ConvLayer],
                 output_size: int,
                 activation: Activation = tf.nn.relu,
                 name: Optional[str] = None):
        super().__init__(name=name)
        self._conv_layers = tuple(tuple(int(v) for v in layer) for layer in conv_layers)
        self._activation = activation
        # The attribute names are the checkpoints' object paths (`_convs`, `_linear`).
        self._convs = [
            snt.Conv2D(channels, kernel, stride=stride, padding="VALID", name=f"conv_{i}")
            for i, (channels, kernel, stride) in enumerate(self._conv_layers)
        ]
        self._flat = snt.Flatten()
        self._linear = snt.Linear(output_size, name="linear")

    @property
    def conv_layers(self) -> Tuple[ConvLayer, ...]:
        """(output channels, kernel size, stride) per convolution, VALID padding."""
        return self._conv_layers

    @property
    def convs(self) -> list:
        return list(self._convs)

    @property
    def linear(self) -> snt.Linear:
        return self._linear

    @property
    def activation(self) -> Activation:
        return self._activation

    @property
    def min_image_size(self) -> int:
        """The smallest height (and width) these convolutions leave at least one pixel of."""
        return min_image_size(self._conv_layers)

    def __call__(self, images: tf.Tensor) -> tf.Tensor:
        check_image_size(type(self).__name__, images.shape[1:3], self._conv_layers)
        x = _image_to_float(images)
        if precision() == "bfloat16":
            return self._bfloat16(x)
        for conv in self._convs:
            x = self._activation(conv(x))
        return self._activation(self._linear(self._flat(x)))

    def _bfloat16(self, x: tf.Tensor) -> tf.Tensor:
        """The same layers computed in bfloat16 from the float32 weights (created in
        float32 first, as the float32 path creates them)."""
        def cast(v):
            return tf.cast(v, tf.bfloat16)

        x = cast(x)
        for conv in self._convs:
            if not hasattr(conv, "w"):
                conv._initialize(tf.cast(x, tf.float32))  # pylint: disable=protected-access
            x = tf.nn.convolution(x, cast(conv.w), strides=conv.stride, padding="VALID")
            x = self._activation(tf.nn.bias_add(x, cast(conv.b)))
        x = self._flat(x)
        if not hasattr(self._linear, "w"):
            self._linear._initialize(tf.cast(x, tf.float32))  # pylint: disable=protected-access
        x = tf.matmul(x, cast(self._linear.w)) + cast(self._linear.b)
        return tf.cast(self._activation(x), tf.float32)


class NatureCNN(ConvTorso):
    """Nature-DQN torso: `[N, H, W, C]` (H, W >= 36) -> `[N, 512]`.

    Conv 32 8x8 s4, conv 64 4x4 s2, conv 64 3x3 s1 (VALID, ReLU), flatten, Linear 512, ReLU.
    """

    CONV_LAYERS: Tuple[ConvLayer, ...] = ((32, 8, 4), (64, 4, 2), (64, 3, 1))

    def __init__(self, name: Optional[str] = None):
        super().__init__(self.CONV_LAYERS, 512, tf.nn.relu, name=name)


class SimpleVisualEncoder(ConvTorso):
    """ML-Agents' `simple` visual encoder: `[N, H, W, C]` (H, W >= 20) -> `[N, output_size]`.

    Conv 16 8x8 s4, conv 32 4x4 s2 (VALID), flatten, Linear `output_size`, each followed
    by LeakyReLU (slope 0.01), as `mlagents.trainers.torch_entities.encoders.
    SimpleVisualEncoder`; `output_size` is ML-Agents' `hidden_units` (default 128).
    ML-Agents rejects images under 20x20 (`MIN_RESOLUTION_FOR_ENCODER`), the size
    below which the second convolution has nothing left: so does this torso. Weights
    start as Sonnet's defaults (ML-Agents' dense layer uses a He-normal init).
    """

    CONV_LAYERS: Tuple[ConvLayer, ...] = ((16, 8, 4), (32, 4, 2))

    def __init__(self, output_size: int = 128, name: Optional[str] = None):
        super().__init__(self.CONV_LAYERS, output_size, leaky_relu, name=name)


class MinAtarCNN(ConvTorso):
    """The MinAtar paper's network torso (Young & Tian 2019): `[N, H, W, C]` (H, W >= 3)
    -> `[N, 128]`. Conv 16 3x3 s1 (VALID, ReLU), flatten, Linear 128, ReLU: for small
    images (MinAtar's 10x10) that the Nature CNN's 8x8 stride-4 kernel would erase."""

    CONV_LAYERS: Tuple[ConvLayer, ...] = ((16, 3, 1),)

    def __init__(self, output_size: int = 128, name: Optional[str] = None):
        super().__init__(self.CONV_LAYERS, output_size, tf.nn.relu, name=name)


def min_image_size(conv_layers: Sequence[ConvLayer]) -> int:
    """The smallest side that VALID `conv_layers` reduce to at least 1 (every side
    reduces alike): backwards from one output pixel, `n_in = (n_out - 1) * stride + kernel`."""
    size = 1
    for _, kernel, stride in reversed(tuple(conv_layers)):
        size = (size - 1) * stride + kernel
    return size


def check_image_size(torso: str, height_width: Sequence[Optional[int]],
                     conv_layers: Sequence[ConvLayer]) -> None:
    """Raises `ImageTooSmallError` naming `torso` when a known height or width is below
    `min_image_size(conv_layers)` (unknown, None, sides are not checked)."""
    smallest = min_image_size(conv_layers)
    sides = tuple(height_width)
    if any(side is not None and side < smallest for side in sides):
        raise ImageTooSmallError(
            f"torso {torso!r} needs images of at least {smallest}x{smallest} (its VALID "
            f"convolutions leave nothing of a smaller one), got {sides[0]}x{sides[1]}")


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

    `kind='auto'` picks by the observation (`resolve_kind`); `'mlp'`, `'nature_cnn'`
    (`'nature'`), `'impala_resnet'` (`'impala'`), `'simple'` (`SimpleVisualEncoder`)
    and `'minatar'` (`MinAtarCNN`) choose explicitly. `kwargs` go to the module. `observation_dtype` is checked to be a
    valid dtype (scaling happens inside the module). Raises `ImageTooSmallError` when
    the image is smaller than a `ConvTorso` kind's `min_image_size`.
    """
    tf.as_dtype(observation_dtype)  # Raises TypeError on a nonsense dtype.
    rank = len(tuple(observation_shape))
    kind = resolve_kind(kind, rank, tuple(observation_shape)[:2])
    if kind in IMAGE_KINDS and rank != 3:
        raise ValueError(f"Torso {kind!r} needs a rank-3 [H, W, C] observation, "
                         f"got shape {tuple(observation_shape)}.")
    if kind == "mlp":
        return MLP(**kwargs)
    conv_torsos = {"nature_cnn": NatureCNN, "simple": SimpleVisualEncoder,
                   "minatar": MinAtarCNN}
    if kind in conv_torsos:
        cls = conv_torsos[kind]
        # Here, not at the first call: the error then names the kind the user chose.
        check_image_size(kind, tuple(observation_shape)[:2], cls.CONV_LAYERS)
        return cls(**kwargs)
    return ImpalaResNet(**kwargs)


def resolve_kind(kind: str, rank: int,
                 height_width: Optional[Sequence[Optional[int]]] = None) -> str:
    """The torso `make_torso(kind=kind)` builds for rank-`rank` observations of
    `height_width` (images; None: unknown): 'auto' becomes 'mlp' below rank 3, and
    for images 'nature_cnn' where they are at least its 36x36, 'minatar' for smaller
    ones (MinAtar's 10x10); an alias becomes its kind; other kinds are checked and kept."""
    if kind not in KINDS:
        raise ValueError(f"Unknown torso kind {kind!r}; expected one of {KINDS}.")
    kind = ALIASES.get(kind, kind)
    if kind != "auto":
        return kind
    if rank != 3:
        return "mlp"
    sides = [s for s in tuple(height_width or ())[:2] if s is not None]
    small = any(s < min_image_size(NatureCNN.CONV_LAYERS) for s in sides)
    return "minatar" if small else "nature_cnn"
