"""What the agents' learning tests share: a learner built once and put back as built
before each test that uses it (one per configuration, so each step is traced once),
the discounted returns their numpy checks are written against, and the check of a
learner's average of its policy's weights (`agents.policy_average`)."""

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


def check_policy_average(learner: Any, batch: Any) -> None:
    """`learner` keeps an average with tau 0.5 and has not stepped: no final policy yet;
    after two steps on `batch` its final policy is the numpy average of the core's
    weights, and the learned weights are back after the block."""
    assert learner.final_policy() is None  # no update averaged: the weights are their own
    core = learner.core.trainable_variables
    learner.policy_average.updates.assign(100.0)  # past its first updates: the rate is tau
    expected = [v.numpy().copy() for v in learner.policy_average.weights]
    for _ in range(2):
        learner.step(batch)
        expected = [0.5 * v.numpy() + 0.5 * e for v, e in zip(core, expected)]
    learned = [v.numpy().copy() for v in core]
    assert any(not np.allclose(v, e) for v, e in zip(learned, expected))  # a real swap
    with learner.final_policy():
        for v, e in zip(core, expected):
            np.testing.assert_allclose(v.numpy(), e, rtol=1e-5, atol=1e-6)
    for v, value in zip(core, learned):  # learning goes on from its own weights
        np.testing.assert_array_equal(v.numpy(), value)
