"""Action masks in every agent's losses (docs/action-masks.md).

Numerically, on hand-made logits: a masked action has probability exactly 0
and contributes nothing (no NaN from its `MASKED_LOGIT` times 0) to CLEAR's
entropy, policy gradient and cloning KL, ACER's V = sum pi Q, bias correction
and trust-region KL, SAC's expectations over actions and its temperature
target. Then in the learners, on real batches of `tests.envs.MaskedChoice` that
forbid the jackpot action everywhere: what the networks say about it (its Q
values, its critics' outputs, its logit) changes no loss, and no update reaches
its parameters.
"""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents.acer import losses as acer_losses
from reverb_agents.agents.clear import losses as clear_losses
from reverb_agents.agents.sac import losses as sac_losses
from reverb_agents.launch.learning import data
from reverb_agents.networks.distributions import ActionSpace
from reverb_agents.networks.observations import ACTION_MASK
from tests import envs
from tests.conftest import SAC_CRITIC_POLICY

ACTIONS = ActionSpace(gym.spaces.Discrete(4))
MASK = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]], np.float32)  # [N, 4]


def _masked(logits: np.ndarray) -> tf.Tensor:
    return ACTIONS.mask_params((tf.constant(logits),), tf.constant(MASK))[0]


def _allowed_only(values: np.ndarray, row: int) -> np.ndarray:
    return values[row][MASK[row] > 0]


@pytest.fixture
def logits():
    rng = np.random.default_rng(0)
    # Large raw logits where the mask forbids: the mask, not small values, must decide.
    raw = rng.normal(size=(3, 4)).astype(np.float32)
    raw[MASK == 0] = 30.0
    return raw, rng.normal(size=(3, 4)).astype(np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_clear_entropy_policy_gradient_and_cloning_kl_see_allowed_actions_only(logits):
    raw, behaviour_raw = logits
    pi, mu = _masked(raw), _masked(behaviour_raw)
    entropy = -clear_losses.entropy_loss(ACTIONS.entropy((pi,))).numpy()
    kl = clear_losses.policy_cloning_loss(ACTIONS, (mu,), (pi,)).numpy()
    for row in range(3):
        p, m = _softmax(_allowed_only(raw, row)), _softmax(_allowed_only(behaviour_raw, row))
        np.testing.assert_allclose(entropy[row], -(p * np.log(p)).sum(), rtol=1e-5)
        np.testing.assert_allclose(kl[row], (m * np.log(m / p)).sum(), rtol=1e-4, atol=1e-6)
    probabilities = tf.nn.softmax(pi).numpy()
    np.testing.assert_array_equal(probabilities[MASK == 0], 0.0)
    # The policy gradient of an allowed action moves no forbidden logit.
    raw_logits = tf.constant(raw)
    with tf.GradientTape() as tape:
        tape.watch(raw_logits)
        pi = ACTIONS.mask_params((raw_logits,), tf.constant(MASK))[0]
        log_pi = ACTIONS.log_prob((pi,), (tf.constant([0, 1, 3]),))
        loss = tf.reduce_sum(clear_losses.policy_gradient_loss(log_pi, tf.ones([3]))
                             - ACTIONS.entropy((pi,)))
    gradient = tape.gradient(loss, raw_logits).numpy()
    assert np.isfinite(gradient).all()
    np.testing.assert_array_equal(gradient[MASK == 0], 0.0)


@pytest.mark.parametrize('rounding', [0.0, -200.0, 200.0])
def test_acer_value_bias_correction_and_kl_ignore_masked_actions(logits, rounding):
    raw, behaviour_raw = logits
    q = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    q[MASK == 0] = 1e6  # a forbidden action's Q must not enter V or the correction
    pi_logits = _masked(raw)
    # float32 holds MASKED_LOGIT only to ~64: the behaviour's forbidden log-probability
    # may round far from the current one's, so rho there is anything (here up to
    # exp(+-200): 0 or inf). The weight pi(a) = 0 must still cancel it.
    mu_logits = _masked(behaviour_raw) + np.where(MASK == 0, rounding, 0.0).astype(np.float32)
    pi, log_pi = tf.nn.softmax(pi_logits), tf.nn.log_softmax(pi_logits)
    v = tf.reduce_sum(pi * q, -1).numpy()
    rho = tf.exp(log_pi - tf.nn.log_softmax(mu_logits))
    correction = acer_losses.bias_correction_loss(log_pi, rho, q - v[:, None], 1.0).numpy()
    kl = ACTIONS.kl_divergence((_masked(behaviour_raw),), (pi_logits,)).numpy()
    for row in range(3):
        p, m = _softmax(_allowed_only(raw, row)), _softmax(_allowed_only(behaviour_raw, row))
        q_row = _allowed_only(q, row)
        np.testing.assert_allclose(v[row], (p * q_row).sum(), rtol=1e-5)
        weight = np.maximum(0.0, 1.0 - m / p) * p  # c = 1, rho = p / m
        np.testing.assert_allclose(correction[row], -(weight * (q_row - v[row]) * np.log(p)).sum(),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(kl[row], (m * np.log(m / p)).sum(), rtol=1e-4, atol=1e-6)


def test_sac_expectations_entropies_and_temperature_targets_over_allowed_actions(logits):
    raw, _ = logits
    q = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    q[MASK == 0] = -1e6  # finite, as critics' outputs are; it must not enter anything
    log_pi = tf.nn.log_softmax(_masked(raw))
    alpha = tf.constant(0.3)
    value = sac_losses.discrete_soft_value([tf.constant(q)], [log_pi], [alpha]).numpy()
    actor = sac_losses.discrete_actor_loss([tf.constant(q)], [log_pi], [alpha]).numpy()
    for row in range(3):
        p = _softmax(_allowed_only(raw, row))
        expected = (p * (_allowed_only(q, row) - 0.3 * np.log(p))).sum()
        np.testing.assert_allclose(value[row], expected, rtol=1e-4)
        np.testing.assert_allclose(actor[row], -expected, rtol=1e-4)
    # Each row's target is the same share of the largest entropy its mask allows.
    target = sac_losses.masked_target_entropy(tf.constant(0.2 * np.log(4.0), tf.float32),
                                              tf.constant(MASK)).numpy()
    np.testing.assert_allclose(target, 0.2 * np.log([3.0, 2.0, 4.0]), rtol=1e-6)
    one_left = sac_losses.masked_target_entropy(tf.constant(0.5), tf.constant([[0, 1, 0, 0.]]))
    np.testing.assert_array_equal(one_left.numpy(), [0.0])


# --- the learners on real batches ---------------------------------------------

JACKPOT = envs.MaskedChoice.JACKPOT


def _forbid_jackpot(batch, action_space: ActionSpace):
    """The batch with the jackpot masked at every step (taken jackpots become the cue,
    and the stored behaviour logits masked alike, as an actor would have stored them)."""
    steps = batch.sequence.steps
    observation = dict(steps.observation)
    mask = observation[ACTION_MASK].numpy()
    mask[..., JACKPOT] = 0
    cue = np.argmax(observation['observation'].numpy(), -1).astype(np.int32)
    action = steps.action[0].numpy()
    action = np.where(action == JACKPOT, cue, action)
    params = steps.behaviour_params[0].numpy()
    flat = action_space.mask_params((params.reshape(-1, 4),), mask.reshape(-1, 4), np.where)[0]
    observation[ACTION_MASK] = tf.constant(mask)
    steps = steps._replace(observation=observation, action=(tf.constant(action),),
                           behaviour_params=(tf.constant(flat.reshape(params.shape)),))
    return batch._replace(sequence=batch.sequence._replace(steps=steps))


def _jackpot_parameters(learner):
    """(variable, index) pairs that only the jackpot action's outputs depend on."""
    parts = learner.core.parts
    found = []
    if hasattr(parts.policy_head, 'b'):
        found.append((parts.policy_head.b, (JACKPOT,)))
    if parts.q_head is not None:
        found.append((parts.q_head.b, (JACKPOT,)))
    for critics in (getattr(learner, 'critics', None), getattr(learner, 'target_critics', None)):
        if critics is not None:
            found.append((critics._mlps._biases[-1], (Ellipsis, JACKPOT)))
    return found


# No LSTM for CLEAR and ACER: a forbidden action is never taken, so never fed back to
# a memory, and its outputs come from the heads alone.
@pytest.mark.parametrize('name,config', [
    ('clear', {'lstm_size': 0}), ('acer', {'lstm_size': 0}), ('sac', {}),
    ('sac', SAC_CRITIC_POLICY)])
def test_nothing_the_networks_say_about_a_masked_action_changes_a_loss(name, config,
                                                                        wired_agent):
    # One learner takes both steps from the same start (every variable it owns put back
    # in between, the jackpot's parameters then shifted): a second learner would only
    # trace the same step again.
    wired = wired_agent(name, envs.MASKED_CHOICE, **config)
    batches = data.open_batches(wired.address, wired.setup.signature, wired.setup.plan,
                                wired.client, timeout_ms=30_000)
    batch = _forbid_jackpot(next(batches), wired.setup.action_space)
    learner = wired.learner
    start = [(variable, variable.numpy()) for variable in learner.variables]

    def unnormalised():
        """Each jackpot parameter in the reward's units: PopArt's rescaling moves a Q
        head's bias with the statistics while sigma * b + mu stays the same."""
        out = []
        for variable, _ in _jackpot_parameters(learner):
            value = variable.numpy()
            q_head = learner.core.parts.q_head
            if q_head is not None and variable is q_head.b:
                mean, std = (x.numpy()[0] for x in q_head.statistics())
                value = value * std + mean
            out.append(value)
        return out

    before = unnormalised()
    metrics = [learner.step(batch)]
    # No loss moved the jackpot's own parameters (Adam moves nothing without a gradient).
    after = unnormalised()
    for (variable, index), old, new in zip(_jackpot_parameters(learner), before, after):
        if 'target' not in variable.name:  # target critics follow the critics by Polyak
            np.testing.assert_allclose(new[index], old[index], rtol=1e-5, atol=1e-6,
                                       err_msg=variable.name)
    for variable, value in start:
        variable.assign(value)
    for variable, index in _jackpot_parameters(learner):
        shifted = variable.numpy()
        shifted[index] += 50.0
        variable.assign(shifted)
    metrics.append(learner.step(batch))
    for key, value in metrics[0].items():
        if value.shape == ():
            assert np.isfinite(value.numpy()), key
            np.testing.assert_allclose(metrics[1][key].numpy(), value.numpy(), rtol=1e-4,
                                       atol=1e-5, err_msg=key)
