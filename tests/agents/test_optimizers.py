"""agents/optimizers.py: the fused Adam is Sonnet's Adam (same slots, same updates) in
fewer traced ops. RMSProp's and Adam's numpy ports are in test_learner_base.py."""

import numpy as np
import sonnet as snt
import tensorflow as tf

from reverb_agents.agents.optimizers import Adam

SHAPES = [(3, 4), (4,), ()]


def run(optimizer, gradients):
    """Parameters (fixed start) after `optimizer` applied each list of `gradients` (a
    None leaves its parameter alone), in one traced step; the values and the step."""
    params = [tf.Variable(np.linspace(-1, 1, int(np.prod(s))).reshape(s).astype(np.float32))
              for s in SHAPES]

    @tf.function
    def step(gs):
        optimizer.apply(gs, params)

    for gs in gradients:
        step([None if g is None else tf.constant(g) for g in gs])
    return [p.numpy() for p in params], optimizer


def test_fused_adam_takes_sonnets_steps():
    rng = np.random.default_rng(0)
    gradients = [[(rng.normal(size=s) * 10.0 ** k).astype(np.float32) for s in SHAPES]
                 for k in (-3, 0, 2, -1, 0)]
    gradients[2][1] = None  # no gradient: the parameter and its moments stay
    kwargs = dict(learning_rate=0.01, beta1=0.8, beta2=0.95, epsilon=1e-3)
    fused, fused_opt = run(Adam(**kwargs), gradients)
    plain, plain_opt = run(snt.optimizers.Adam(**kwargs), gradients)
    for f, p in zip(fused, plain):
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6)
    for f, p in zip(fused_opt.m + fused_opt.v, plain_opt.m + plain_opt.v):
        np.testing.assert_allclose(f.numpy(), p.numpy(), rtol=1e-5, atol=1e-8)
    assert int(fused_opt.step.numpy()) == int(plain_opt.step.numpy()) == len(gradients)


def test_fused_adam_traces_a_fraction_of_sonnets_ops():
    def ops(optimizer):
        params = [tf.Variable(tf.zeros(s)) for s in SHAPES * 4]
        step = tf.function(lambda: optimizer.apply([tf.ones(s) for s in SHAPES * 4], params))
        return len(step.get_concrete_function().graph.get_operations())

    assert ops(Adam(0.1)) * 3 < ops(snt.optimizers.Adam(0.1))
