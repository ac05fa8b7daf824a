"""Action masks end to end (docs/action-masks.md): each agent learns
`tests.envs.MaskedChoice`, whose jackpot action raises whenever it is masked and
earns the most whenever it is not, without ever raising (random warm-up,
sampled training actions, greedy evaluation); its SavedModel takes the mask as
an input and plays greedy and sampled episodes without the library, never
taking a masked action; a mask of the wrong length is one `error:` line."""

import time

import gymnasium as gym
import numpy as np
import pytest

from reverb_agents.launch import api
from tests import envs
from tests.conftest import SAC_CRITIC_POLICY, SAC_FEED_FORWARD

# Returns (10-step episodes, see MaskedChoice): best 10; "jackpot when allowed, else
# random" ~8; "always the cue" 7.5; random among the allowed ~4.5. 9 needs both the
# jackpot's preference and the mask overruling it.
THRESHOLD = 9.0
# Feed-forward CLEAR levels off at 9.3-9.4 with its small network and a greedy
# evaluation of 10 episodes spread 8.7-9.4 over runs: 8.5 is still above both
# one-sided policies, so it needs the cue and the mask as well.
THRESHOLDS = {'clear': 8.5}
# Feed-forward: with a 16-unit LSTM, CLEAR and ACER stayed near 8 here after 12k-60k
# steps, and CLEAR near random on the same cue task without any mask, so that is
# the recurrent learners' budget, not the mask (docs/action-masks.md). Recurrent
# cores are masked through the same code (tests/agents/test_action_masks.py).
SMALL = dict(lstm_size=0, hidden_sizes=(32,), batch_size=8, unroll_length=10)
# SAC stops at the target (the last 20 training episodes and a greedy evaluation of 10
# at 9), about 2k of its 3k env steps (seeds 0-2: 2080 / 1920 / 2080; the critics'
# policy, seed 0 three times: 1680 / 2000 / 1680; each final evaluation 10.0). CLEAR's
# and ACER's sampled training returns stay under 9, so they run their budgets.
SMALL_SAC = dict(critic_hidden_sizes=(32,), batch_size=64, target_return=THRESHOLD,
                 **SAC_FEED_FORWARD)
CASES = {
    'clear': ('clear', 10000, SMALL),
    'acer': ('acer', 6000, SMALL),
    'sac': ('sac', 3000, dict(hidden_sizes=(32,), **SMALL_SAC)),
    'sac_critic_policy': ('sac', 3000, dict(**SAC_CRITIC_POLICY, **SMALL_SAC)),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_each_agent_learns_the_masked_task_and_exports_the_mask(case, tmp_path,
                                                                compare_exported):
    agent, steps, config = CASES[case]
    started = time.monotonic()
    # MaskedActionError from any actor step would end the run with that error.
    result = api.train(agent, envs.MASKED_CHOICE_CLI, steps, preset=False, seed=0, num_envs=8,
                       eval_episodes=10, logdir=str(tmp_path / 'run'), **config)
    print(f'{case}: {time.monotonic() - started:.1f} s, return '
          f'{result.summary["eval_return_mean"]}')
    assert result.summary['eval_return_mean'] >= THRESHOLDS.get(case, THRESHOLD), result.summary
    assert result.summary['saved_model'], 'a masked policy must export'

    # The SavedModel without the library: greedy returns as the library's own.
    expected, standalone = compare_exported(result.logdir, result.summary['saved_model'],
                                            tmp_path)
    # (Learning is judged on the 10 evaluation episodes above; these 3 must match.)
    np.testing.assert_allclose(standalone, expected, rtol=1e-5)
    # Sampled actions through `load_policy` (TensorFlow only): never a masked one.
    specs = result.policy.specs
    assert specs['action_mask'] == {'shape': [4], 'dtype': 'float32'}
    assert specs['observation'] == {'shape': [3], 'dtype': 'float32', 'key': 'observation'}
    env = gym.make(envs.MASKED_CHOICE_CLI)
    sampled = [result.policy.run_episode(env, seed=s, deterministic=False) for s in range(20)]
    assert np.mean(sampled) > 5.0  # ran 200 sampled steps without a masked action


def test_a_mask_of_the_wrong_length_is_one_error_line(run_cli):
    # The core checks the mask's width for every agent; one agent through run.py.
    for agent in ('sac',):
        result = run_cli([f'--agent={agent}', '--env=tests.envs:MaskedChoiceWrongMask-v0',
                          '--num_steps=100'])
        assert result.returncode == 1, result.stderr[-2000:]
        assert result.errors == [
            'error: tests.envs:MaskedChoiceWrongMask-v0: the action mask has 5 entries but '
            'the actions Discrete(4) need 4'], result.stderr[-2000:]
        assert 'Traceback' not in result.stderr
