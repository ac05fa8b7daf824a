"""One owner of how sequences become Reverb items.

An `ItemLayout` says everything about the stored data that the server, the
writers and the datasets must agree on: the step and core-state specs (a
reward of k components included), the sequence length and the period
between sequences, whether one item groups all of an actor's environments,
and hence the table signature and its packed form (`replay.packing`). The
wiring builds one per run and hands it out; nothing else decides the layout.
"""

import dataclasses
from typing import Any, Callable, Optional, Sequence as SequenceT

import reverb
import tensorflow as tf

from reverb_agents.replay import trajectory
from reverb_agents.replay.packing import Packing
from reverb_agents.replay.writer import SequenceWriter


@dataclasses.dataclass(frozen=True)
class ItemLayout:
    step_spec: trajectory.Step  # one step's specs, no leading dims
    core_state_spec: Any  # one environment's core state specs
    sequence_length: int  # steps per sequence
    period: int  # steps between the starts of consecutive sequences
    envs_per_item: int = 0  # E > 0: an item holds E environments' sequences ([L, E, ...])

    @property
    def signature(self) -> trajectory.Sequence:
        """One item's `Sequence` of specs, as learners and actors see it (unpacked)."""
        return trajectory.sequence_signature(self.step_spec, self.core_state_spec,
                                             self.sequence_length, self.envs_per_item)

    @property
    def packed_signature(self) -> tuple:
        """What the tables store: one column per dtype."""
        return Packing(self.signature).packed_signature()

    @property
    def sequences_per_item(self) -> int:
        return max(1, self.envs_per_item)

    def items(self, sequences: int) -> int:
        """Items that hold `sequences` sequences (rounded up)."""
        return -(-sequences // self.sequences_per_item)

    def matches(self, served_signature: Any) -> bool:
        """Whether a table's (packed) signature is this layout's."""
        ours = [(s.shape.as_list(), s.dtype) for s in self.packed_signature]
        theirs = [(s.shape.as_list(), s.dtype) for s in tf.nest.flatten(served_signature)]
        return ours == theirs

    def writer(self, client: reverb.Client, num_envs: int, tables: SequenceT[str],
               priority_fn: Optional[Callable[[str], float]] = None) -> SequenceWriter:
        """An actor's writer of `num_envs` environments in this layout."""
        if self.envs_per_item and num_envs != self.envs_per_item:
            raise ValueError(f'a grouped layout of {self.envs_per_item} environments per item '
                             f'cannot take a writer of {num_envs}')
        return SequenceWriter(client, self.step_spec, self.core_state_spec, num_envs,
                              self.sequence_length, tables, priority_fn, period=self.period,
                              group_envs=bool(self.envs_per_item))
