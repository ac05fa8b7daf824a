"""What the agents' learning tests share: a learner built once and put back as built
before each test that uses it (one per configuration, so each step is traced once),
and the discounted returns their numpy checks are written against."""

from typing import Any, Callable, Tuple

import numpy as np


class Rebuilt:
    """`build(*args, **overrides)` -> (learner, ...), called once; `fresh()` puts every
    variable the learner owns (its networks, optimiser slots, counters, statistics,
    learning rates) back as built and returns what `build` returned: the state a new
    learner would start from, with its step already traced."""

    def __init__(self, build: Callable[..., Tuple[Any, ...]], *args: Any, **overrides: Any):
        self.made = build(*args, **overrides)
        self.initial = [(v, v.numpy()) for v in self.made[0].variables]

    def fresh(self) -> Tuple[Any, ...]:
        for variable, value in self.initial:
            variable.assign(value)
        self.made[0]._assigned.clear()  # `assign_rate`'s memo of the learning rates
        return self.made


def numpy_discounted_returns(rewards, discounts, bootstrap):
    """G_t = r_t + d_t G_{t+1}, G_T = bootstrap, by a loop over t (leading axis T)."""
    out = np.zeros_like(rewards)
    g = np.array(bootstrap, copy=True)
    for t in reversed(range(len(rewards))):
        g = rewards[t] + discounts[t] * g
        out[t] = g
    return out
