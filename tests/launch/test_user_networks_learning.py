"""Networks of the user's own learning (docs/networks.md), each through the Python
API with CLEAR's, SAC's or ACER's defaults (no preset) but for what a test names: a
Keras GRU cell remembering, per-key Keras layers on a `Dict`, a Keras Functional CNN
on pixels, SAC with a Keras torso, ACER with a Keras torso and memory. (The command
line, the launchers, export and resume: test_user_networks.py.)"""

from reverb_agents import train


def test_a_keras_gru_cell_remembers(tmp_path):
    """The memory task (recall a cue after 8 blank steps; chance 0.25, best 1) with a
    Keras GRUCell in the LSTM's place, CLEAR's defaults otherwise, but for the heads on
    the memory's output alone (`memory_skip=False`, as measured: with the default skip
    a run to the budget with 64 environments, half replayed, scored 0.65). It stops
    once a greedy check scores 0.95 (about 40k env steps). `deterministic`: the result
    is the seed's, not the threads' timing (GRU cells learn this task more slowly than
    LSTM cells: 0.7-1.0 at 400k across seeds with threads and those batches,
    docs/benchmarks.md#networks-of-your-own)."""
    from network_examples import my_networks
    import benchmarks.untuned_envs  # noqa: F401 -- registers CueMemory-v0
    result = train('clear', 'CueMemory-v0', 400_000, preset=False, memory=my_networks.gru,
                   memory_skip=False, deterministic=True, target_return=0.95, seed=0,
                   logdir=str(tmp_path / 'run'), log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 0.925, result.summary  # 0.9 of the way


def test_per_key_keras_layers_on_a_dict_observation(tmp_path):
    """`DictReach-v0` (best 0.907): a Keras layer per key and a combiner;
    `deterministic`, as the memory test, stopping once a greedy check scores 0.85
    (about 25k env steps)."""
    from network_examples import my_networks
    import benchmarks.untuned_envs  # noqa: F401 -- registers DictReach-v0
    result = train('clear', 'DictReach-v0', 200_000, preset=False, torso=my_networks.per_key,
                   torso_kwargs={'units': 64}, deterministic=True, target_return=0.85, seed=0,
                   logdir=str(tmp_path / 'run'), log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 0.8, result.summary  # random: -0.40


def test_sac_with_a_keras_torso_solves_pendulum(tmp_path):
    """The SAC learning test's budget and settings (test_sac_learning_and_export.py),
    its actor's 64 x 64 MLP a Keras one; the critics' encoder is a copy of it."""
    from network_examples import my_networks
    from tests.launch.test_sac_learning_and_export import PENDULUM_STEPS, SMALL_SAC_SETTINGS
    settings = {k: v for k, v in SMALL_SAC_SETTINGS.items() if k != 'hidden_sizes'}
    result = train('sac', 'Pendulum-v1', PENDULUM_STEPS, preset=False, torso=my_networks.mlp,
                   torso_kwargs={'units': 64, 'layers': 2}, seed=0,
                   logdir=str(tmp_path / 'run'), log_interval_s=1000.0, **settings)
    assert result.summary['eval_return_mean'] >= -200, result.summary


def test_a_keras_functional_cnn_learns_minatar_breakout(tmp_path):
    """uint8 images through a Keras Functional CNN (the MinAtar torso's shape), with
    the pixel learning test's settings (test_pixels_learning.py), to above random. The
    run stops once a greedy check scores 2.5, a margin above what the final evaluation
    (5 other episodes) must score."""
    from network_examples import my_networks
    result = train('clear', 'MinAtar/Breakout-v1', 250_000, preset=False,
                   torso=my_networks.cnn, num_envs=64, batch_size=32, unroll_length=20,
                   replay_fraction=0.75, replay_size=20000, lstm_size=0,
                   learning_rate=0.0006, value_normalization='none', eval_episodes=5,
                   target_return=2.5, seed=0, logdir=str(tmp_path / 'run'),
                   log_interval_s=1000.0)
    # A uniformly random policy scores about 0.5 (one brick, now and then).
    assert result.summary['eval_return_mean'] >= 1.5, result.summary


def test_acer_with_a_keras_torso_and_memory_learns_cartpole(tmp_path):
    """ACER's defaults (no preset) with a Keras torso and a Keras GRU cell, whose
    average network is a third copy of both; `deterministic`, as the memory test
    (with threads' timing 105-500 at this budget), stopping once a greedy check scores
    490."""
    from network_examples import my_networks
    result = train('acer', 'CartPole-v1', 150_000, preset=False, torso=my_networks.mlp,
                   memory=my_networks.gru, memory_kwargs={'units': 32}, deterministic=True,
                   target_return=490, seed=0, logdir=str(tmp_path / 'run'),
                   log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 475, result.summary
