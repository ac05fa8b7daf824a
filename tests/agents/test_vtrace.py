"""Tests for agents/vtrace.py against a naive reading of the IMPALA paper."""

import numpy as np
import pytest
import tensorflow as tf

from reverb_agents.agents import vtrace

CLIP_THRESHOLDS = [None, 0.5, 1.0, 3.7]


def _random_inputs(seed, T=7, B=3, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return dict(
        # Spread of log-rhos wide enough that every clip threshold is active.
        log_rhos=rng.uniform(-2.5, 2.5, size=(T, B)).astype(dtype),
        discounts=rng.uniform(0.0, 1.0, size=(T, B)).astype(dtype),
        rewards=rng.normal(size=(T, B)).astype(dtype),
        values=rng.normal(size=(T, B)).astype(dtype),
        bootstrap_value=rng.normal(size=(B,)).astype(dtype),
    )


def _naive_vtrace(log_rhos, discounts, rewards, values, bootstrap_value,
                  clip_rho_threshold, clip_pg_rho_threshold, lambda_=1.0):
    """Paper formulas, term by term (Espeholt et al., 2018, eq. 1 and 4).

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} discount_i c_i) delta_t V,
    delta_t V = rho_t (r_t + discount_t V(x_{t+1}) - V(x_t)),
    A_s = rho^pg_s (r_s + discount_s v_{s+1} - V(x_s)).
    """
    T, B = values.shape
    rho = np.exp(log_rhos)
    clipped_rho = rho if clip_rho_threshold is None else np.minimum(
        clip_rho_threshold, rho)
    clipped_pg_rho = rho if clip_pg_rho_threshold is None else np.minimum(
        clip_pg_rho_threshold, rho)
    c = lambda_ * np.minimum(1.0, rho)
    values_ext = np.concatenate([values, bootstrap_value[None]], axis=0)

    vs = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            total = values[s, b]
            for t in range(s, T):
                trace = 1.0
                for i in range(s, t):
                    trace *= discounts[i, b] * c[i, b]
                delta_t = clipped_rho[t, b] * (
                    rewards[t, b] + discounts[t, b] * values_ext[t + 1, b]
                    - values[t, b])
                total += trace * delta_t
            vs[s, b] = total

    vs_ext = np.concatenate([vs, bootstrap_value[None]], axis=0)
    pg_advantages = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            pg_advantages[s, b] = clipped_pg_rho[s, b] * (
                rewards[s, b] + discounts[s, b] * vs_ext[s + 1, b]
                - values[s, b])
    return vs, pg_advantages


@pytest.mark.parametrize("clip_rho_threshold", CLIP_THRESHOLDS)
@pytest.mark.parametrize("clip_pg_rho_threshold", CLIP_THRESHOLDS)
def test_matches_naive_reference(clip_rho_threshold, clip_pg_rho_threshold):
    inputs = _random_inputs(seed=0)
    expected_vs, expected_pg = _naive_vtrace(
        **inputs, clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold)

    out = vtrace.from_importance_weights(
        **inputs, clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold)

    assert isinstance(out, vtrace.VTraceReturns)
    np.testing.assert_allclose(out.vs.numpy(), expected_vs, rtol=1e-10)
    np.testing.assert_allclose(
        out.pg_advantages.numpy(), expected_pg, rtol=1e-10)


@pytest.mark.parametrize("T", [1, 5, 10])
def test_float32_matches_reference(T):
    inputs = _random_inputs(seed=T, T=T, dtype=np.float32)
    expected_vs, expected_pg = _naive_vtrace(
        **{k: v.astype(np.float64) for k, v in inputs.items()},
        clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0)

    out = vtrace.from_importance_weights(**inputs)

    assert out.vs.dtype == tf.float32
    np.testing.assert_allclose(out.vs.numpy(), expected_vs, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(out.pg_advantages.numpy(), expected_pg,
                               rtol=1e-5, atol=1e-5)


def test_clipping_is_active():
    """Guards the reference test: different thresholds must give different
    results on these inputs, otherwise the parametrization proves nothing."""
    inputs = _random_inputs(seed=0)
    results = [
        vtrace.from_importance_weights(
            **inputs, clip_rho_threshold=th, clip_pg_rho_threshold=th)
        for th in CLIP_THRESHOLDS
    ]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            assert not np.allclose(results[i].vs, results[j].vs)
            assert not np.allclose(results[i].pg_advantages,
                                   results[j].pg_advantages)


@pytest.mark.parametrize("clip_rho_threshold", [None, 3.7])
def test_episode_end_splits_sequence(clip_rho_threshold):
    """A zero discount at step k-1 cuts the sequence into independent halves.

    The first half [0, k) bootstraps on V(x_k) = values[k]; because its last
    discount is 0, that bootstrap value must not matter either.
    """
    T, k = 8, 3
    inputs = _random_inputs(seed=1, T=T)
    inputs["discounts"][k - 1] = 0.0
    kwargs = dict(clip_rho_threshold=clip_rho_threshold,
                  clip_pg_rho_threshold=clip_rho_threshold)

    full = vtrace.from_importance_weights(**inputs, **kwargs)

    def half(sl, bootstrap_value):
        return vtrace.from_importance_weights(
            log_rhos=inputs["log_rhos"][sl], discounts=inputs["discounts"][sl],
            rewards=inputs["rewards"][sl], values=inputs["values"][sl],
            bootstrap_value=bootstrap_value, **kwargs)

    first = half(slice(0, k), inputs["values"][k])
    second = half(slice(k, T), inputs["bootstrap_value"])
    np.testing.assert_allclose(
        full.vs.numpy(), np.concatenate([first.vs, second.vs]), rtol=1e-12)
    np.testing.assert_allclose(
        full.pg_advantages.numpy(),
        np.concatenate([first.pg_advantages, second.pg_advantages]),
        rtol=1e-12)

    first_other = half(slice(0, k), np.full_like(inputs["values"][k], 123.0))
    np.testing.assert_allclose(first_other.vs, first.vs, rtol=1e-12)
    np.testing.assert_allclose(first_other.pg_advantages, first.pg_advantages,
                               rtol=1e-12)

    # Without the episode end, the later rewards do reach the first half.
    inputs["discounts"][k - 1] = 0.9
    joined = vtrace.from_importance_weights(**inputs, **kwargs)
    assert not np.allclose(joined.vs[:k], first.vs)


def test_inside_tf_function_with_dynamic_shapes():
    spec = tf.TensorSpec([None, None], tf.float32)

    @tf.function(input_signature=[spec, spec, spec, spec,
                                  tf.TensorSpec([None], tf.float32)])
    def compiled(log_rhos, discounts, rewards, values, bootstrap_value):
        out = vtrace.from_importance_weights(
            log_rhos, discounts, rewards, values, bootstrap_value,
            clip_rho_threshold=3.7, clip_pg_rho_threshold=0.5)
        return out.vs, out.pg_advantages

    for T in (5, 9):  # Same trace, different unroll lengths.
        inputs = _random_inputs(seed=T, T=T, dtype=np.float32)
        vs, pg_advantages = compiled(**inputs)
        expected_vs, expected_pg = _naive_vtrace(
            **{k: v.astype(np.float64) for k, v in inputs.items()},
            clip_rho_threshold=3.7, clip_pg_rho_threshold=0.5)
        np.testing.assert_allclose(vs.numpy(), expected_vs, rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(pg_advantages.numpy(), expected_pg,
                                   rtol=1e-5, atol=1e-5)
    assert compiled.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("name", ["log_rhos", "discounts", "rewards", "values",
                                  "bootstrap_value"])
@pytest.mark.parametrize("add_dim", [True, False])
def test_wrong_rank_raises(name, add_dim):
    inputs = _random_inputs(seed=2)
    inputs[name] = inputs[name][..., None] if add_dim else inputs[name][0]
    with pytest.raises(ValueError, match=f"`{name}` must have rank"):
        vtrace.from_importance_weights(**inputs)


def test_no_gradient_through_outputs():
    variables = {k: tf.Variable(v) for k, v in _random_inputs(seed=3).items()}
    with tf.GradientTape() as tape:
        out = vtrace.from_importance_weights(**variables)
        loss = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
    grads = tape.gradient(loss, variables)
    for name, grad in grads.items():
        assert grad is None or not np.any(grad.numpy()), name


@pytest.mark.parametrize("lambda_", [0.0, 0.5, 0.9])
def test_lambda_scales_the_traces(lambda_):
    """Espeholt et al.'s lambda: c_i = lambda min(1, rho_i) in the naive sum; an
    episode end (discount 0) inside the unroll still cuts every trace."""
    inputs = _random_inputs(11)
    inputs["discounts"][3] = 0.0
    expected_vs, expected_pg = _naive_vtrace(**inputs, clip_rho_threshold=1.0,
                                             clip_pg_rho_threshold=1.0, lambda_=lambda_)
    out = vtrace.from_importance_weights(**inputs, lambda_=lambda_)
    np.testing.assert_allclose(out.vs.numpy(), expected_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.pg_advantages.numpy(), expected_pg, rtol=1e-10, atol=1e-10)
    if lambda_ == 0.0:  # one-step targets
        v_tp1 = np.concatenate([inputs["values"][1:], inputs["bootstrap_value"][None]])
        rho = np.minimum(1.0, np.exp(inputs["log_rhos"]))
        np.testing.assert_allclose(out.vs.numpy(), inputs["values"] + rho * (
            inputs["rewards"] + inputs["discounts"] * v_tp1 - inputs["values"]), atol=1e-10)
