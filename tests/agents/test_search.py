"""Search spaces (`agents/search.py`): what each kind suggests to a real Optuna trial,
the checks against a field's default, the `--space` file forms, and the spaces every
agent declares beside its defaults (each accepted by its own config)."""

import optuna
import pytest

from reverb_agents.agents import configs, registry, search
from reverb_agents.launch.tuning import spaces


def _trial(seed=0):
    return optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed)).ask()


def test_each_kind_suggests_values_in_its_range():
    for seed in range(20):
        trial = _trial(seed)
        assert 1e-5 <= search.LogUniform(1e-5, 1e-2).suggest(trial, 'lr') <= 1e-2
        assert 0.1 <= search.Uniform(0.1, 1.0).suggest(trial, 'c') <= 1.0
        n = search.IntRange(2, 9).suggest(trial, 'n')
        assert isinstance(n, int) and 2 <= n <= 9
        # A tuple choice goes through Optuna as its text and comes back a tuple.
        assert search.HIDDEN_SIZES.suggest(trial, 'h') in search.HIDDEN_SIZES.values
        assert trial.params['h'] in ('64,64', '128,128', '256,256')


def test_log_uniform_spreads_over_decades():
    values = [search.LogUniform(1e-5, 1e-1).suggest(_trial(s), 'x') for s in range(200)]
    below = sum(v < 1e-3 for v in values) / len(values)
    assert 0.35 < below < 0.65  # half the decades, half the draws (uniform: ~1%)


def test_a_space_must_hold_its_fields_kind():
    search.LogUniform(1e-5, 1e-2).check_type('learning_rate', 1e-3)
    search.Uniform(0.0, 1.0).check_type('clip', None)  # an unset Optional[float]
    with pytest.raises(search.SpaceError, match='batch_size.*cannot hold its default 32'):
        search.Uniform(8.0, 64.0).check_type('batch_size', 32)
    with pytest.raises(search.SpaceError, match='lr.*cannot hold'):
        search.IntRange(1, 3).check_type('lr', 1e-3)
    with pytest.raises(search.SpaceError, match="choice 'big' is not of the type"):
        search.Choice(64, 'big').check_type('lstm_size', 64)
    for bad in (lambda: search.LogUniform(0.0, 1.0), lambda: search.Uniform(2.0, 1.0),
                lambda: search.IntRange(1, 2.5), lambda: search.Choice()):
        with pytest.raises(search.SpaceError):
            bad()


def test_space_file_entries():
    assert search.from_spec('a', {'log_uniform': [1e-4, 1e-2]}) == search.LogUniform(1e-4, 1e-2)
    assert search.from_spec('b', {'int': [1, 4]}) == search.IntRange(1, 4)
    assert search.from_spec('c', {'log_int': [1, 64]}) == search.IntRange(1, 64, log=True)
    assert search.from_spec('d', {'choice': [[64, 64], [32]]}).values == ((64, 64), (32,))
    with pytest.raises(search.SpaceError, match='e: a space is one of'):
        search.from_spec('e', {'normal': [0, 1]})


@pytest.mark.parametrize('agent', sorted(registry.AGENTS))
def test_every_agent_declares_a_space_its_config_accepts(agent):
    config_class = registry.AGENTS[agent].config_class
    declared = spaces.declared(config_class)
    assert {'learning_rate', 'discounting', 'num_envs'} <= set(declared), declared
    spaces.check(config_class, agent, declared)  # every choice and both ends of each range
    # The flag's help says the range.
    fields = configs.flat_fields(config_class)
    assert 'tuned over log-uniform 1e-05..0.01' in configs.doc(fields['learning_rate'][0])


def test_the_tuning_page_lists_every_declared_space():
    """docs/tuning.md's tables are the configs' declarations, row for row."""
    import os
    page = open(os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'tuning.md')).read()
    from reverb_agents.launch.runs.options import RunOptions
    for agent, spec in registry.AGENTS.items():
        defaults = {'num_envs': spec.run_defaults.get('num_envs', RunOptions().num_envs),
                    **configs.flat_defaults(spec.config_class)}
        for name, space in spaces.declared(spec.config_class).items():
            default = defaults[name]
            shown = ','.join(map(str, default)) if isinstance(default, tuple) else default
            assert f'| `{name}` | {shown} | {space.describe()} |' in page, (agent, name)
