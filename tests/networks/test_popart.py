"""PopArt (networks/popart.py) against numpy ports written here, and the heads using it."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.networks import popart
from reverb_agents.networks.cores import ActorCriticCore, CoreInputs, QHead
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.numpy_core import NumpyCore


def _numpy_moments(batches, masks, step_size):
    """The moments after merging `batches` `[N, G]` one at a time, as a plain loop."""
    groups = batches[0].shape[1]
    mean, second, count = np.zeros(groups), np.ones(groups), 0
    for targets, mask in zip(batches, masks):
        count += 1
        for g in range(groups):
            valid = [t for t, m in zip(targets[:, g], mask[:, g]) if m]
            if not valid:
                continue
            rate = max(step_size, 1.0 / count)
            mean[g] += rate * (np.mean(valid) - mean[g])
            second[g] += rate * (np.mean(np.square(valid)) - second[g])
    return mean, second


@pytest.mark.parametrize('step_size', [1e-3, 0.5])
def test_moments_match_a_numpy_loop(step_size):
    rng = np.random.default_rng(0)
    batches = [rng.normal(5.0 * i, 2.0 + i, (7, 3)).astype(np.float32) for i in range(6)]
    masks = [rng.uniform(size=(7, 3)) < 0.7 for _ in range(6)]
    masks[2][:, 1] = False  # a group with no valid entry keeps its moments
    mean, second, count = tf.zeros([3]), tf.ones([3]), tf.constant(0.0)
    for targets, mask in zip(batches, masks):
        mean, second, count = popart.updated_moments(mean, second, count, targets, mask,
                                                     step_size)
    want_mean, want_second = _numpy_moments(batches, masks, step_size)
    np.testing.assert_allclose(mean.numpy(), want_mean, rtol=1e-5)
    np.testing.assert_allclose(second.numpy(), want_second, rtol=1e-5)
    np.testing.assert_allclose(
        popart.std_from_moments(mean, second).numpy(),
        np.clip(np.sqrt(want_second - want_mean ** 2), popart.STD_MIN, popart.STD_MAX),
        rtol=1e-4)


@pytest.mark.parametrize('groups', [1, 4])
def test_an_update_preserves_every_unnormalised_output(groups):
    rng = np.random.default_rng(1)
    layer = popart.PopArtLinear(4, normalized=True, groups=groups, step_size=0.3)
    features = tf.constant(rng.normal(size=(16, 5)), tf.float32)
    for scale in (1.0, 100.0, 1e-2, 1e4):
        before = layer(features).numpy()
        targets = rng.normal(scale, scale, (32, groups)).astype(np.float32)
        layer.update(targets, np.ones_like(targets))
        mean, std = layer.statistics()
        # Exact up to float32 rounding at the statistics' scale.
        tolerance = 1e-5 * float(tf.reduce_max(tf.abs(mean) + std)) + 1e-6
        np.testing.assert_allclose(layer(features).numpy(), before, rtol=0, atol=tolerance)
    mean, std = layer.statistics()
    # The normalised output is the unnormalised one in sigma units.
    np.testing.assert_allclose(layer.normalized(features).numpy(),
                               layer.normalize(layer(features)).numpy()
                               if groups == 4 else (layer(features).numpy() - mean[0]) / std[0],
                               rtol=1e-3, atol=1e-3)
    assert std.numpy().min() > 1.0  # the statistics followed the large targets


def test_without_normalisation_the_layer_is_plain_linear():
    layer = popart.PopArtLinear(2)
    features = tf.ones([3, 4])
    out = layer(features)
    layer.update(tf.fill([3, 1], 50.0), tf.ones([3, 1]))  # a no-op
    np.testing.assert_array_equal(layer(features).numpy(), out.numpy())
    np.testing.assert_array_equal(out.numpy(), (features @ layer.w + layer.b).numpy())
    assert layer.std().numpy() == 1.0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match='groups'):
        popart.PopArtLinear(3, normalized=True, groups=2)
    with pytest.raises(ValueError, match='step_size'):
        popart.PopArtLinear(1, normalized=True, step_size=0.0)


def test_rescaled_matches_the_paper_formula():
    rng = np.random.default_rng(2)
    w, b = rng.normal(size=(3, 2)), rng.normal(size=2)
    old_mean, old_std, new_mean, new_std = 1.0, 2.0, -3.0, 0.5
    w2, b2 = popart.rescaled(tf.constant(w), tf.constant(b), old_mean, old_std, new_mean,
                             new_std)
    x = rng.normal(size=(4, 3))
    np.testing.assert_allclose(new_std * (x @ w2.numpy() + b2.numpy()) + new_mean,
                               old_std * (x @ w + b) + old_mean, rtol=1e-10)


def _core(**kwargs):
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    core = ActorCriticCore(space, ActionSpace(gym.spaces.Discrete(2)), hidden_sizes=(8,),
                           lstm_size=4, value_normalization=True, **kwargs)
    core.create_variables()
    return core


def test_the_core_and_its_numpy_mirror_give_values_in_the_rewards_units():
    core = _core()
    head = core.parts.baseline_head
    head.update(tf.fill([10, 1], 200.0) + tf.range(10.0)[:, None] * 30.0, tf.ones([10, 1]))
    rng = np.random.default_rng(3)
    obs = rng.uniform(-1, 1, (5, 3)).astype(np.float32)
    first = np.ones(5, bool)
    prev_action = (np.zeros(5, np.int32),)
    prev_reward = np.zeros(5, np.float32)
    out, _ = core(CoreInputs(obs, prev_action, prev_reward, first), core.initial_state(5))
    mean, std = head.statistics()
    np.testing.assert_allclose(out.baseline.numpy(),
                               std[0] * head.normalized(out.features).numpy() + mean[0],
                               rtol=1e-5)
    assert np.abs(out.baseline.numpy() - 335.0).max() < 10 * std[0]  # near the targets
    mirror = NumpyCore(core, core.action_space, seed=0)
    baseline = mirror.step(obs, prev_action, prev_reward, first, mirror.initial_state(5))[3]
    np.testing.assert_allclose(baseline, out.baseline.numpy(), rtol=1e-4)
    # One output shared by every task (`--num_tasks=1` in a sequence): the task is ignored.
    tasks = np.arange(5, dtype=np.int32)
    out_tasks, _ = core(CoreInputs(obs, prev_action, prev_reward, first, tasks),
                        core.initial_state(5))
    np.testing.assert_array_equal(out_tasks.baseline.numpy(), out.baseline.numpy())
    np.testing.assert_array_equal(
        mirror.step(obs, prev_action, prev_reward, first, mirror.initial_state(5), tasks)[3],
        baseline)


def test_per_group_counts_average_a_group_met_late_exactly():
    """Tasks: a group whose first targets come after many batches of another's is
    averaged exactly at first (its own count), not moved by `step_size` from (0, 1)."""
    mean, second, count = tf.zeros([2]), tf.ones([2]), tf.zeros([2])
    only_first = np.array([[1.0, 0.0]] * 4, np.float32)
    for _ in range(50):
        mean, second, count = popart.updated_moments(
            mean, second, count, np.full([4, 2], 3.0, np.float32), only_first, 1e-3)
    np.testing.assert_allclose(count.numpy(), [50.0, 0.0])
    np.testing.assert_allclose(mean.numpy(), [3.0, 0.0], rtol=1e-5)
    targets = np.array([[0.0, 400.0], [0.0, 600.0]], np.float32)
    mean, second, count = popart.updated_moments(
        mean, second, count, targets, np.array([[0.0, 1.0]] * 2, np.float32), 1e-3)
    np.testing.assert_allclose(mean.numpy(), [3.0, 500.0], rtol=1e-5)
    np.testing.assert_allclose(popart.std_from_moments(mean, second).numpy()[1], 100.0,
                               rtol=1e-3)
    np.testing.assert_allclose(count.numpy(), [50.0, 1.0])


def test_a_head_per_task_keeps_each_tasks_scale_and_values():
    """One output and set of statistics per task: a task-1 update rescales task 1's
    output only; every unnormalised value, of either task, is preserved; `normalize`
    and `std` with a group put each value in its own task's units."""
    core = _core(num_tasks=2)
    head = core.parts.baseline_head
    rng = np.random.default_rng(4)
    features = tf.constant(rng.normal(size=(6, 4)), tf.float32)
    task = tf.constant([0, 1, 0, 1, 1, 0])
    before = head(features, task).numpy()
    both_before = [head(features, tf.fill([6], k)).numpy() for k in (0, 1)]
    targets = rng.normal(1000.0, 100.0, (32, 1)).astype(np.float32)
    head.update(np.tile(targets, [1, 2]), np.tile([[0.0, 1.0]], [32, 1]))
    mean, std = head.statistics()
    assert mean[0].numpy() == 0.0 and std[0].numpy() == 1.0  # task 0 untouched
    np.testing.assert_allclose(mean[1].numpy(), targets.mean(), rtol=1e-4)
    np.testing.assert_allclose(head(features, task).numpy(), before, atol=1e-2)
    for k in (0, 1):
        np.testing.assert_allclose(head(features, tf.fill([6], k)).numpy(), both_before[k],
                                   atol=1e-2)
    values = tf.constant([1000.0, 1000.0])
    np.testing.assert_allclose(head.normalize(values, tf.constant([0, 1])).numpy(),
                               [1000.0, (1000.0 - mean[1].numpy()) / std[1].numpy()], rtol=1e-5)
    np.testing.assert_allclose(head.std(tf.constant([1, 0])).numpy(), [std[1], 1.0])
    metrics = popart.task_metrics(head)
    assert sorted(metrics) == sorted(popart.task_metric_names(2))
    assert float(metrics['popart/task1/mean']) == float(mean[1])


def test_the_core_picks_each_rows_task_value_as_its_numpy_mirror_does():
    core = _core(num_tasks=3)
    head = core.parts.baseline_head
    for k, scale in enumerate((1.0, 100.0, -50.0)):
        head.update(np.tile(np.linspace(0.0, scale, 8, dtype=np.float32)[:, None], [1, 3]),
                    np.eye(3, dtype=np.float32)[[k] * 8])
    head.b.assign([0.5, 1.0, -2.0])  # as learning would: each task's values its own
    rng = np.random.default_rng(5)
    T, B = 4, 3
    obs = rng.uniform(-1, 1, (T, B, 3)).astype(np.float32)
    task = rng.integers(0, 3, (T, B)).astype(np.int32)
    inputs = CoreInputs(obs, (np.zeros([T, B], np.int32),), np.zeros([T, B], np.float32),
                        np.zeros([T, B], bool), task)
    out, _ = core.unroll(inputs, core.initial_state(B))
    every = [core.unroll(inputs._replace(task=np.full([T, B], k, np.int32)),
                         core.initial_state(B))[0].baseline.numpy() for k in range(3)]
    np.testing.assert_allclose(out.baseline.numpy(),
                               np.choose(task, every), rtol=1e-6)
    assert np.abs(every[1] - every[0]).max() > 1.0  # the tasks' values differ
    # Without a task, the first task's value (an exported policy's, say).
    np.testing.assert_allclose(core.unroll(inputs._replace(task=()), core.initial_state(B))[0]
                               .baseline.numpy(), every[0], rtol=1e-6)
    mirror = NumpyCore(core, core.action_space, seed=0)
    state = mirror.initial_state(B)
    for t in range(T):
        *_, baseline, state = mirror.step(obs[t], (np.zeros(B, np.int32),),
                                          np.zeros(B, np.float32), np.zeros(B, bool), state,
                                          task[t])
        np.testing.assert_allclose(baseline, out.baseline.numpy()[t], rtol=1e-4, atol=1e-4)


def test_a_q_head_keeps_a_block_of_action_values_per_task():
    """ACER's Q head with two tasks: each task's three action values are its own block
    with its own statistics, and an update of one task's block preserves every value."""
    head = QHead(3, normalized=True, num_tasks=2, popart_step_size=0.5)
    rng = np.random.default_rng(6)
    features = tf.constant(rng.normal(size=(5, 4)), tf.float32)
    task = tf.constant([1, 0, 1, 1, 0])
    before = [head(features, tf.fill([5], k)).numpy() for k in (0, 1)]
    assert before[0].shape == (5, 3) and np.abs(before[0] - before[1]).max() > 1e-3
    np.testing.assert_array_equal(head(features, task).numpy(),
                                  np.where(task.numpy()[:, None] == 1, before[1], before[0]))
    popart.update_by_task(head, tf.constant(rng.normal(300.0, 50.0, (4, 2)), tf.float32),
                          tf.ones([4, 2]), tf.ones([4, 2], tf.int32))
    mean, std = head.statistics()
    assert mean[0].numpy() == 0.0 and mean[1].numpy() > 100.0
    for k in (0, 1):
        np.testing.assert_allclose(head(features, tf.fill([5], k)).numpy(), before[k],
                                   atol=1e-3)
