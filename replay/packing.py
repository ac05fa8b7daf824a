"""How a `Sequence` is laid out in Reverb: one column per dtype.

Reverb's sampler pays per column of an item (each column is its own chunk to
find, decompress and slice), and a `Sequence` has ten or more fields: the
same floats read as one column come several times faster than as twelve
(measured: docs/benchmarks.md#replay-and-the-data-pipeline). So each item is
stored packed: every field of `steps` is flattened over its own dimensions
and the fields of one dtype are concatenated on a last axis, one column per
dtype (`[L, (E,) F]`); the core state likewise (`[(E,) F]`). For a
feed-forward agent on a float observation that is three columns (float32,
int32 actions, bool `first`) instead of ten.

The packed layout is a storage detail: `SequenceWriter` packs what it
writes, `replay.dataset` unpacks what it reads, and everything else sees
`Sequence`s. Reverb checks the packed signature at insert time, so a writer
whose specs disagree with the table still fails there, unless the
disagreement changes no dtype and no field's element count (e.g. an
observation stored as `[2, 3]` instead of `[3, 2]`).
"""

from typing import Any, List, NamedTuple, Sequence as SequenceT, Tuple

import numpy as np
import tensorflow as tf
import tree

from reverb_agents.replay import trajectory


class _Field(NamedTuple):
    index: int  # position in the flattened `Sequence`
    shape: Tuple[int, ...]  # the field's own dimensions (after the leading ones)
    size: int  # elements per leading index: prod(shape)


class _Column(NamedTuple):
    part: str  # 'steps' or 'core_state'
    dtype: tf.DType
    fields: Tuple[_Field, ...]

    @property
    def width(self) -> int:
        return sum(f.size for f in self.fields)


class Packing:
    """The packed layout of one item signature (a `Sequence` of `tf.TensorSpec`s)."""

    def __init__(self, signature: trajectory.Sequence):
        self.signature = signature
        group = trajectory.envs_per_item(signature)
        sequence_length = signature.steps.discount.shape[0]
        # Leading dims of each part: steps [L] or [L, E]; core state [] or [E].
        self._lead = {'steps': (sequence_length, group) if group else (sequence_length,),
                      'core_state': (group,) if group else ()}
        flat = tree.flatten(signature)
        num_steps_fields = len(tree.flatten(signature.steps))
        columns: List[_Column] = []
        for part, indices in (('steps', range(num_steps_fields)),
                              ('core_state', range(num_steps_fields, len(flat)))):
            lead = len(self._lead[part])
            by_dtype = {}
            for i in indices:
                shape = tuple(flat[i].shape[lead:])
                by_dtype.setdefault(flat[i].dtype, []).append(
                    _Field(i, shape, int(np.prod(shape, dtype=np.int64))))
            columns += [_Column(part, dtype, tuple(fields)) for dtype, fields in by_dtype.items()]
        self._columns = columns
        self._num_fields = len(flat)

    @property
    def num_columns(self) -> int:
        return len(self._columns)

    def packed_signature(self) -> Tuple[tf.TensorSpec, ...]:
        """The Reverb table signature: one `[*lead, F]` spec per column."""
        return tuple(tf.TensorSpec([*self._lead[c.part], c.width], c.dtype)
                     for c in self._columns)

    def pack(self, flat: SequenceT[np.ndarray], extra_dims: int = 0) -> List[np.ndarray]:
        """Flattened `Sequence` arrays -> the packed columns (numpy).

        `extra_dims`: how many more leading dims than the signature's every
        array has. The writer packs its `[L, B, ...]` step buffers and `[B, ...]`
        core states at once (`extra_dims=1`) and slices out each environment's
        item.
        """
        columns = []
        for c in self._columns:
            lead = len(self._lead[c.part]) + extra_dims
            pieces = [np.reshape(flat[f.index], flat[f.index].shape[:lead] + (f.size,))
                      for f in c.fields]
            # A fresh array even for one field: the caller's buffers are reused.
            columns.append(np.concatenate(pieces, axis=-1))
        return columns

    def environment(self, columns: SequenceT[np.ndarray], b: int) -> List[np.ndarray]:
        """Environment `b`'s item out of columns packed with `extra_dims=1`."""
        return [x[:, b] if c.part == 'steps' else x[b] for c, x in zip(self._columns, columns)]

    def unpack(self, columns: SequenceT[Any]) -> trajectory.Sequence:
        """Packed columns (tensors, any extra leading batch dims) -> a `Sequence`."""
        flat: List[Any] = [None] * self._num_fields
        for c, column in zip(self._columns, columns):
            column = tf.convert_to_tensor(column)
            pieces = (tf.split(column, [f.size for f in c.fields], axis=-1)
                      if len(c.fields) > 1 else [column])
            for f, piece in zip(c.fields, pieces):
                outer = piece.shape[:-1]
                if outer.is_fully_defined():
                    flat[f.index] = tf.reshape(piece, outer.as_list() + list(f.shape))
                else:
                    flat[f.index] = tf.reshape(
                        piece, tf.concat([tf.shape(piece)[:-1], list(f.shape)], 0))
        return tree.unflatten_as(self.signature, flat)
