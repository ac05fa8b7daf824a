"""SAC's targets and losses against hand-written numpy references."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import returns
from reverb_agents.agents.sac import losses


def _reference_n_step(rewards, discounts, first, next_values, gamma, entropy=None):
    """The first transition's target, walking forward step by step. With `entropy`
    (ALF's multi-step soft target) every reward r_k gains gamma d_k e_k, e_k the
    entropy reward of step k + 1's observation, and `next_values` are plain Q(s_{k+1})."""
    n, batch = rewards.shape
    if entropy is None:
        entropy = np.zeros_like(rewards)
    out = np.zeros(batch)
    for b in range(batch):
        total, scale = 0.0, 1.0
        for k in range(n):
            total += scale * (rewards[k, b] + gamma * discounts[k, b] * entropy[k, b])
            scale *= gamma * discounts[k, b]
            if k == n - 1 or first[k + 2, b]:
                total += scale * next_values[k, b]  # V(s_{k+1})
                break
        out[b] = total
    return out


def _random_windows(seed, n, batch, k=None):
    """Random n-step inputs: rewards and next values `[n, batch]` (`[n, batch, k]`
    with components), discounts `[n, batch]` (0 at about one step in five), episode
    starts `[n + 1, batch]` (about one in four)."""
    rng = np.random.default_rng(seed)
    shape = (n, batch) if k is None else (n, batch, k)
    rewards = rng.normal(size=shape).astype(np.float32)
    discounts = (rng.uniform(size=(n, batch)) > 0.2).astype(np.float32)
    first = rng.uniform(size=(n + 1, batch)) < 0.25
    next_values = rng.normal(size=shape).astype(np.float32)
    return rng, rewards, discounts, first, next_values


@pytest.mark.parametrize('n', [1, 2, 4])
def test_n_step_targets_match_reference(n):
    _, rewards, discounts, first, next_values = _random_windows(n, n, 64)
    got = returns.n_step_targets(tf.constant(rewards), tf.constant(discounts), tf.constant(first),
                                tf.constant(next_values), 0.9)
    np.testing.assert_allclose(got.numpy(), _reference_n_step(rewards, discounts, first,
                                                              next_values, 0.9), rtol=1e-5)


def test_n_step_targets_of_reward_components_are_per_component_targets():
    n, batch, k = 3, 32, 2
    _, rewards, discounts, first, next_values = _random_windows(7, n, batch, k)
    got = returns.n_step_targets(tf.constant(rewards), tf.constant(discounts[..., None]),
                                tf.constant(first[..., None]), tf.constant(next_values), 0.9)
    assert got.shape == (batch, k)
    for c in range(k):
        np.testing.assert_allclose(got.numpy()[:, c], _reference_n_step(
            rewards[..., c], discounts, first, next_values[..., c], 0.9), rtol=1e-5)


def _soft_value_continuous(q_next, log_prob, alpha, entropy):
    """Min over replicas, minus the entropy term when it is in the reward."""
    value = q_next.min(axis=0)
    return value - alpha * log_prob if entropy else value


@pytest.mark.parametrize('entropy', [True, False])
def test_one_step_critic_target_terminal_truncated_and_min_over_replicas(entropy):
    # Columns: an ordinary step, a termination, a truncation (the next step is the
    # placeholder holding the final observation: discount stays 1 and bootstraps).
    gamma, alpha = 0.99, 0.2
    rewards = np.array([[1.0, 2.0, 3.0]], np.float32)
    discounts = np.array([[1.0, 0.0, 1.0]], np.float32)
    first = np.array([[False, False, False], [False, False, False]])
    q_next = np.array([[5.0, 7.0, -1.0], [4.0, 9.0, -3.0]], np.float32)  # [R=2, N]
    log_prob = np.array([-1.0, 0.5, 2.0], np.float32)
    value = _soft_value_continuous(q_next, log_prob, alpha, entropy)
    target = returns.n_step_targets(
        tf.constant(rewards), tf.constant(discounts), tf.constant(first),
        tf.constant(value[None]), gamma).numpy()
    entropy_term = alpha * log_prob if entropy else 0.0
    expected = rewards[0] + gamma * discounts[0] * (np.min(q_next, 0) - entropy_term)
    np.testing.assert_allclose(target, expected, rtol=1e-6)
    assert target[1] == pytest.approx(2.0)  # terminated: no bootstrap, no entropy
    # Truncated: bootstraps exactly like the ordinary step.
    assert target[2] == pytest.approx(3.0 + gamma * (-3.0 - (alpha * 2.0 if entropy else 0.0)))


def test_two_step_target_stops_at_a_truncation_placeholder():
    # Step 1 is the placeholder after a truncation at step 0 (first[2] is set):
    # the target bootstraps from V(s_1), not from step 1's (dummy) reward.
    rewards = np.array([[1.0], [100.0]], np.float32)
    discounts = np.array([[1.0], [0.0]], np.float32)
    first = np.array([[False], [False], [True]])
    next_values = np.array([[10.0], [-50.0]], np.float32)
    target = returns.n_step_targets(tf.constant(rewards), tf.constant(discounts),
                                   tf.constant(first), tf.constant(next_values), 0.5)
    assert float(target[0]) == pytest.approx(1.0 + 0.5 * 10.0)


def _np_log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_discrete_soft_value_is_the_exact_expectation_averaged_over_branches():
    rng = np.random.default_rng(0)
    qs = [rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)]
    log_probs = [_np_log_softmax(rng.normal(size=(5, 3))).astype(np.float32),
                 _np_log_softmax(rng.normal(size=(5, 4))).astype(np.float32)]
    alphas = [0.3, 0.05]
    expected = np.zeros(5)
    for b in range(5):
        branch_values = []
        for q, lp, alpha in zip(qs, log_probs, alphas):
            branch_values.append(sum(np.exp(lp[b, a]) * (q[b, a] - alpha * lp[b, a])
                                     for a in range(q.shape[1])))
        expected[b] = np.mean(branch_values)
    got = losses.discrete_soft_value([tf.constant(q) for q in qs],
                                     [tf.constant(lp) for lp in log_probs],
                                     [tf.constant(a) for a in alphas])
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    no_entropy = losses.discrete_soft_value([tf.constant(q) for q in qs],
                                            [tf.constant(lp) for lp in log_probs],
                                            [tf.constant(a) for a in alphas], entropy=False)
    expected_q = np.mean([(np.exp(lp) * q).sum(-1) for q, lp in zip(qs, log_probs)], 0)
    np.testing.assert_allclose(no_entropy.numpy(), expected_q, rtol=1e-5)
    actor = losses.discrete_actor_loss([tf.constant(q) for q in qs],
                                       [tf.constant(lp) for lp in log_probs],
                                       [tf.constant(a) for a in alphas])
    np.testing.assert_allclose(actor.numpy(), -expected, rtol=1e-5)


def test_critic_loss_is_half_squared_error_per_replica_over_valid_rows():
    q = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], np.float32)
    targets = np.array([2.0, 2.0, 100.0], np.float32)
    mask = np.array([1.0, 1.0, 0.0], np.float32)
    got = losses.critic_loss(tf.constant(q), tf.constant(targets), tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, [0.5 * (1.0 + 0.0) / 2, 0.5 * (4.0 + 4.0) / 2])


def test_critic_loss_adds_the_squared_errors_of_reward_components():
    q = np.array([[[1.0, 0.0], [2.0, 2.0]]], np.float32)  # [R = 1, N = 2, k = 2]
    targets = np.array([[2.0, 3.0], [2.0, 0.0]], np.float32)
    mask = np.array([1.0, 1.0], np.float32)
    got = losses.critic_loss(tf.constant(q), tf.constant(targets), tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, [0.5 * ((1.0 + 9.0) + (0.0 + 4.0)) / 2])


def test_critic_loss_learns_each_component_where_its_mask_says():
    """Row 1 learns its second component only (a non-episodic signal at a placeholder);
    row 2 nothing: the mean divides by the two rows that learn anything."""
    q = np.array([[[1.0, 0.0], [5.0, 2.0], [9.0, 9.0]]], np.float32)  # [R = 1, N = 3, k = 2]
    targets = np.array([[2.0, 3.0], [0.0, 0.0], [0.0, 0.0]], np.float32)
    mask = np.array([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]], np.float32)
    got = losses.critic_loss(tf.constant(q), tf.constant(targets), tf.constant(mask),
                             tf.constant([1.0, 0.5, 1.0])).numpy()
    np.testing.assert_allclose(got, [0.5 * ((1.0 + 9.0) + 0.5 * 4.0) / 2])


@pytest.mark.parametrize('entropy,rises', [(0.1, True), (3.0, False)])
def test_temperature_rises_below_the_target_entropy_and_falls_above(entropy, rises):
    log_alpha = tf.Variable(0.0)
    with tf.GradientTape() as tape:
        loss = losses.temperature_loss(log_alpha, tf.fill([8], entropy), 1.0)
    gradient = float(tape.gradient(loss, log_alpha))
    # Gradient descent moves log_alpha against the gradient.
    assert (gradient < 0) == rises


def test_clip_gradient_is_identity_forward_and_clips_backward():
    x = tf.constant([1.0, -2.0, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = losses.clip_gradient(x, 0.5)
        loss = tf.reduce_sum(y * tf.constant([10.0, -10.0, 0.1]))
    np.testing.assert_allclose(y.numpy(), x.numpy())
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), [0.5, -0.5, 0.1])


def test_continuous_actor_loss():
    got = losses.continuous_actor_loss(tf.constant([1.0, 2.0]), tf.constant([-1.0, 0.5]), 0.2)
    np.testing.assert_allclose(got.numpy(), [0.2 * -1.0 - 1.0, 0.2 * 0.5 - 2.0])


def test_three_step_targets_add_the_entropy_reward_at_every_step_by_hand():
    # gamma 0.5, r = (1, 2, 3), e = (0.1, 0.2, 0.3) (entropy rewards of s_1, s_2, s_3),
    # Q(s_1..s_3) = (10, 20, 30). Columns: no episode end; a termination at step 1;
    # step 1 a placeholder (first[2]); step 2 a placeholder (first[3]).
    rewards = np.array([[1.0] * 4, [2.0] * 4, [3.0] * 4], np.float32)
    discounts = np.ones((3, 4), np.float32)
    discounts[1, 1] = 0.0
    first = np.zeros((4, 4), bool)
    first[2, 2] = True
    first[3, 3] = True
    entropy = np.array([[0.1] * 4, [0.2] * 4, [0.3] * 4], np.float32)
    q_next = np.array([[10.0] * 4, [20.0] * 4, [30.0] * 4], np.float32)
    got = returns.n_step_targets(tf.constant(rewards), tf.constant(discounts),
                                tf.constant(first), tf.constant(q_next), 0.5,
                                entropy_rewards=tf.constant(entropy)).numpy()
    expected = [
        1 + 0.5 * (0.1 + 2 + 0.5 * (0.2 + 3 + 0.5 * (0.3 + 30))),  # 6.6375
        1 + 0.5 * (0.1 + 2 + 0.0 * (0.2 + 3)),                     # 2.05
        1 + 0.5 * (0.1 + 10),                                       # 6.05
        1 + 0.5 * (0.1 + 2 + 0.5 * (0.2 + 20)),                     # 7.1
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_allclose(got, _reference_n_step(
        rewards, discounts, first, q_next, 0.5, entropy), rtol=1e-6)


def test_n_step_entropy_rewards_match_reference_with_components():
    n, batch, k = 3, 48, 2
    rng, rewards, discounts, first, q_next = _random_windows(3, n, batch, k)
    entropy = rng.normal(size=(n, batch)).astype(np.float32)
    got = returns.n_step_targets(tf.constant(rewards), tf.constant(discounts[..., None]),
                                tf.constant(first[..., None]), tf.constant(q_next), 0.9,
                                entropy_rewards=tf.constant(entropy[..., None])).numpy()
    for c in range(k):  # the entropy reward enters every component
        np.testing.assert_allclose(got[:, c], _reference_n_step(
            rewards[..., c], discounts, first, q_next[..., c], 0.9, entropy), rtol=1e-5)


def test_replica_min_follows_the_sign_of_each_reward_weight():
    rng = np.random.default_rng(5)
    q = rng.normal(size=(3, 4, 5, 3)).astype(np.float32)  # [R, N, outputs, k]
    weights = np.array([2.0, -0.5, 0.0], np.float32)
    got = losses.replica_min(tf.constant(q), tf.constant(weights)).numpy()
    expected = np.zeros(q.shape[1:], np.float32)
    for idx in np.ndindex(*q.shape[1:]):
        replicas = [q[(r,) + idx] for r in range(q.shape[0])]
        # Pessimistic for the weighted value: min for w >= 0, max for w < 0.
        expected[idx] = max(replicas) if weights[idx[-1]] < 0 else min(replicas)
    np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(losses.replica_min(tf.constant(q[..., 0])).numpy(),
                               q[..., 0].min(0))


def test_masked_temperature_loss_is_the_mean_over_valid_rows():
    entropy = tf.constant([1.0, 2.0, 100.0, 4.0])
    mask = tf.constant([1.0, 1.0, 0.0, 1.0])
    got = losses.temperature_loss(tf.constant(0.5), entropy, 1.5, mask)
    assert float(got) == pytest.approx(0.5 * ((1.0 + 2.0 + 4.0) / 3 - 1.5))
    assert float(losses.masked_mean(entropy, mask)) == pytest.approx(7.0 / 3)


def test_entropy_penalty_is_the_squared_gap_and_moves_the_entropy_alone():
    entropy = tf.constant([0.2, 1.0, 0.5])
    behaviour = tf.constant([1.0, 1.0, 0.1])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([entropy, behaviour])
        got = losses.entropy_penalty(entropy, behaviour)
        total = tf.reduce_sum(got)
    np.testing.assert_allclose(got.numpy(), [0.64, 0.0, 0.16], rtol=1e-6)
    # d/dH (H_mu - H)^2 = 2 (H - H_mu): towards the acting policy's entropy.
    np.testing.assert_allclose(tape.gradient(total, entropy).numpy(), [-1.6, 0.0, 0.8],
                               rtol=1e-6)
    assert tape.gradient(total, behaviour) is None


def test_action_spread_is_each_rows_std_over_the_allowed_actions():
    rng = np.random.default_rng(0)
    q = rng.normal(0, 3, (5, 4)).astype(np.float32)
    allowed = np.ones((5, 4), np.float32)
    allowed[1, [0, 2]] = 0.0
    allowed[2, [0, 1, 2]] = 0.0  # one action left: no spread
    expected = []
    for row, ok in zip(q, allowed):
        values = [v for v, a in zip(row, ok) if a]
        mean = sum(values) / len(values)
        expected.append((sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)
    np.testing.assert_allclose(losses.action_spread(tf.constant(q), tf.constant(allowed)),
                               expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses.action_spread(tf.constant(q)), q.std(-1), rtol=1e-5)
    q_var = tf.Variable(q)
    with tf.GradientTape() as tape:
        spread = tf.reduce_sum(losses.action_spread(q_var))
    assert tape.gradient(spread, q_var) is None


def test_rising_scale_jumps_up_at_once_and_falls_by_tau():
    tau = 0.1
    scale = np.float32(2.0)
    walked = []
    for t, batch in enumerate([5.0, 1.0, 1.0, 8.0, 3.0]):
        if t == 0 or batch > scale:  # the first sets it; a larger spread sets it
            scale = np.float32(batch)
        else:
            scale = np.float32((1 - tau) * scale + tau * batch)
        walked.append(scale)
    got, scale_t = [], tf.constant([2.0])
    for t, batch in enumerate([5.0, 1.0, 1.0, 8.0, 3.0]):
        scale_t = losses.rising_scale(scale_t, tf.constant([batch]), tau, tf.constant([t == 0]))
        got.append(float(scale_t[0]))
    np.testing.assert_allclose(got, walked, rtol=1e-6)
    assert got[1] == pytest.approx(4.6) and got[3] == 8.0
