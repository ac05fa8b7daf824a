"""Task sequences (`launch/environments/task_sequence.py`): switching every environment
at the boundary."""

import numpy as np

from reverb_agents.launch.environments import task_sequence
from reverb_agents.networks.observations import ACTION_MASK


def test_every_environment_switches_to_the_next_task_at_the_boundary():
    num_envs, steps_per_task = 4, 40
    envs = task_sequence.TaskSequenceVectorEnv(['CartPole-v1', 'Acrobot-v1'], num_envs, seed=0,
                                               steps_per_task=steps_per_task)
    rng = np.random.default_rng(0)
    observations, _ = envs.reset(seed=0)
    autoreset = np.zeros(num_envs, bool)
    crossed = False
    for _ in range(60):
        before = envs.env_steps
        mask = observations[ACTION_MASK]
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        observations, _, terminated, truncated, info = envs.step(actions)
        real = ~autoreset

        assert envs.env_steps - before == real.sum()  # reset steps do not count
        if before >= steps_per_task and not crossed:
            # The first step after the boundary: every running episode is cut short there
            # (truncated, not terminated, so it bootstraps) ...
            crossed = True
            assert (truncated | terminated)[real].all()
            assert not terminated[real & truncated].any()
        elif crossed and real.any():
            # ... and from the next step on every environment is in the second task.
            assert envs.current_task == 'Acrobot-v1'
            np.testing.assert_array_equal(observations['observation'][:, :4], 0.0)
            np.testing.assert_array_equal(observations[ACTION_MASK], 1)
            # Each observation's task, for the run's bookkeeping (not the agent's input).
            np.testing.assert_array_equal(info[task_sequence.TASK], 1)
        if not crossed:  # the step that reaches the boundary is still in the first task
            assert before < steps_per_task
            np.testing.assert_array_equal(observations['observation'][:, 4:], 0.0)
            np.testing.assert_array_equal(observations[ACTION_MASK][:, 2], 0)
            np.testing.assert_array_equal(info[task_sequence.TASK], 0)
        autoreset = terminated | truncated
    assert crossed and envs.visit == 1
    envs.close()


def test_the_sequence_cycles_and_stays_in_the_last_task():
    envs = task_sequence.TaskSequenceVectorEnv(['CartPole-v1', 'Acrobot-v1'], 1, seed=0,
                                               steps_per_task=10, task_cycles=2,
                                               start_env_steps=25)
    assert (envs.visit, envs.current_task) == (2, 'CartPole-v1')  # a resumed run's place
    envs.env_steps = 1000
    assert (envs.visit, envs.current_task) == (3, 'Acrobot-v1')
