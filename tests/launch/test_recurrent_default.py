"""The defaults remember: CLEAR with no preset and no flag on the memory task of the
untuned suite (recall a cue after 8 blank steps; chance 0.25, best 1), whose
feed-forward default scored at chance (docs/benchmarks.md#untuned-defaults)."""

from reverb_agents import train


def test_clear_defaults_remember_a_cue(tmp_path):
    """The suite's budget for the task, 200k, stopping once a greedy check scores 0.95
    (about 17k env steps); `deterministic`, so the result is the seed's (with threads,
    to the budget: 1.0 on seeds 0, 1 and 2)."""
    import benchmarks.untuned_envs  # noqa: F401 -- registers CueMemory-v0
    result = train('clear', 'CueMemory-v0', 200_000, preset=False, deterministic=True, seed=0,
                   target_return=0.95, logdir=str(tmp_path / 'run'), export=False,
                   log_interval_s=1000.0)
    assert result.summary['eval_return_mean'] >= 0.9, result.summary
