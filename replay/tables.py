"""Reverb tables: `queue` (on-policy), `replay` (off-policy), `variables` (weights),
and `env_steps` (actors' real environment steps across processes, `replay.env_steps`).

Signatures come from the specs, so a mismatched writer fails at insert time
with Reverb's message instead of corrupting a batch. `queue` and `replay`
hold items in `replay.packing`'s layout (one column per dtype).
"""

from typing import Any, Dict, List, Optional

import reverb
import tensorflow as tf

from reverb_agents.replay import trajectory
from reverb_agents.replay.batches import QUEUE, REPLAY, REPLAY_EVICTIONS
from reverb_agents.replay.packing import Packing

VARIABLES = 'variables'
ENV_STEPS = 'env_steps'
ENV_STEPS_QUEUE_SIZE = 1_000_000  # reports held while no learner drains them
# One report: env steps since the last, then the finished episodes' returns and lengths.
ENV_STEPS_SIGNATURE = (tf.TensorSpec([], tf.int64), tf.TensorSpec([None], tf.float64),
                       tf.TensorSpec([None], tf.int64))



def make_tables(signature: trajectory.Sequence,
                variables_signature: Any,
                queue_size: int,
                replay_size: int,
                min_replay_size: int = 1,
                replay_eviction: str = 'fifo',
                samples_per_insert: Optional[float] = None,
                samples_per_insert_tolerance: float = 0.1,
                priority_exponent: Optional[float] = None,
                seeded_sampling: bool = False) -> List[reverb.Table]:
    """The tables of the design.

    Args:
      signature: one item, a `Sequence` of `tf.TensorSpec`s (stored packed).
      variables_signature: nest of `tf.TensorSpec`, the learner's weights.
      queue_size: items the on-policy queue holds before actors block.
      replay_size: items the replay table holds before evicting.
      min_replay_size: items in `replay` before it can be sampled.
      replay_eviction: 'fifo' or 'reservoir' (random discard).
      samples_per_insert: when set, `replay` holds this sample-to-insert ratio
        (within `samples_per_insert_tolerance` of it) with Reverb's rate limiter.
      priority_exponent: when set, `replay` samples item i with probability
        priority_i^exponent / sum_j priority_j^exponent; else uniformly.
      seeded_sampling: `replay` samples the item of lowest priority, which a
        seeded `replay.seeded.SampleClock` sets so that sampling is uniform in an
        order the seed fixes (deterministic runs); FIFO eviction only.
    """
    # Long: its docstring names every table and its limiter; each table is one short statement.
    if replay_eviction not in REPLAY_EVICTIONS:
        raise ValueError(f'replay_eviction must be one of {REPLAY_EVICTIONS}, got {replay_eviction!r}')
    if seeded_sampling and (priority_exponent is not None or replay_eviction != 'fifo'):
        raise ValueError('seeded sampling samples uniformly and evicts FIFO: it replaces '
                         'prioritized sampling and reservoir eviction, which draw from '
                         "Reverb's unseeded generator")
    if samples_per_insert:
        # Reverb rejects an error buffer smaller than 2 * max(1, samples_per_insert).
        # At least a few inserts of slack, so actor and learner overlap instead of
        # taking turns.
        error_buffer = max(4.0 * max(1.0, samples_per_insert),
                           samples_per_insert_tolerance * min_replay_size * samples_per_insert)
        limiter = reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert, min_replay_size, error_buffer)
    else:
        limiter = reverb.rate_limiters.MinSize(min_replay_size)
    packed = Packing(signature).packed_signature()
    if seeded_sampling:
        sampler = reverb.selectors.MinHeap()
    elif priority_exponent is None:
        sampler = reverb.selectors.Uniform()
    else:
        sampler = reverb.selectors.Prioritized(priority_exponent)
    remover = (reverb.selectors.Fifo() if replay_eviction == 'fifo'
               else reverb.selectors.MinHeap())
    return [
        reverb.Table.queue(QUEUE, max_size=queue_size, signature=packed),
        reverb.Table(REPLAY, sampler=sampler, remover=remover,
                     max_size=replay_size, rate_limiter=limiter, signature=packed),
        reverb.Table(VARIABLES, sampler=reverb.selectors.Fifo(),
                     remover=reverb.selectors.Fifo(), max_size=1,
                     rate_limiter=reverb.rate_limiters.MinSize(1),
                     signature=variables_signature),
        reverb.Table.queue(ENV_STEPS, max_size=ENV_STEPS_QUEUE_SIZE,
                           signature=ENV_STEPS_SIGNATURE),
    ]


def variables_signature(variables: List[tf.Variable]) -> tuple:
    return tuple(tf.TensorSpec(v.shape, v.dtype) for v in variables)


def table_sizes(client: reverb.Client) -> Dict[str, int]:
    """Items each table of the server behind `client` holds."""
    return {name: info.current_size for name, info in client.server_info(timeout=10).items()}
