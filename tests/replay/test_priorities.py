"""Priorities written back to a real Reverb table, and each agent's learner steps
changing them (read back from the table)."""

import numpy as np
import pytest
import reverb

from reverb_agents.agents.contract import PRIORITIES
from reverb_agents.launch.learning import data
from reverb_agents.replay import tables
from reverb_agents.replay.priorities import INITIAL_PRIORITY, PriorityUpdater


def _priorities(client: reverb.Client, table: str, count: int):
    """{key: priority} of a table's items, sampled until all `count` were seen."""
    seen = {}
    for _ in range(50):
        for sample in client.sample(table, num_samples=64, emit_timesteps=False):
            seen[int(np.ravel(sample.info.key)[0])] = float(np.ravel(sample.info.priority)[0])
        if len(seen) == count:
            return seen
    raise AssertionError(f'saw {len(seen)} of {count} items')


def test_updater_writes_the_replayed_rows_and_keeps_the_largest(reverb_server):
    server = reverb_server([reverb.Table(tables.REPLAY, reverb.selectors.Uniform(),
                                         reverb.selectors.Fifo(), 100,
                                         reverb.rate_limiters.MinSize(1))])
    client = reverb.Client(f'localhost:{server.port}')
    for i in range(4):
        client.insert([np.float32(i)], {tables.REPLAY: INITIAL_PRIORITY})
    keys = np.array(sorted(_priorities(client, tables.REPLAY, 4)), np.uint64)
    updater = PriorityUpdater(client)
    # Rows 0 and 1 share an item (grouped environments): it gets the larger. Row 3 is
    # fresh: its item keeps its priority.
    updater.update(np.array([keys[0], keys[0], keys[1], keys[2]]),
                   np.array([0.5, 2.5, 0.25, 9.0]), np.array([True, True, True, False]))
    updater.update(np.array([keys[3]]), np.array([0.125]), np.array([True]))
    updater.flush()
    assert updater.num_writes >= 1 and updater.max_priority == 2.5
    got = _priorities(client, tables.REPLAY, 4)
    assert got == {int(keys[0]): 2.5, int(keys[1]): 0.25, int(keys[2]): INITIAL_PRIORITY,
                   int(keys[3]): 0.125}


@pytest.mark.parametrize('name,env_id', [('clear', 'CartPole-v1'), ('acer', 'CartPole-v1'),
                                         ('sac', 'Pendulum-v1')])
def test_learner_steps_change_the_priorities_in_reverb(name, env_id, wired_agent):
    # Not rate limited: reading every item's priority samples far beyond SAC's ratio.
    wired = wired_agent(name, env_id, rate_limited=False, replay_sampler='prioritized',
                        priority_exponent=0.6,
                        **({'replay_fraction': 0.5} if name == 'clear' else {}))
    setup = wired.setup
    count = wired.client.server_info()[tables.REPLAY].current_size
    before = _priorities(wired.client, tables.REPLAY, count)
    assert set(before.values()) == {INITIAL_PRIORITY}  # the actor's: nothing learned yet
    updater = PriorityUpdater(wired.client)
    learn = data.make_learn(wired.learner, priorities=updater)
    batches = data.open_batches(wired.address, setup.signature, setup.plan, wired.client,
                                timeout_ms=30_000)
    metrics = {}
    for _ in range(2):  # ACER's first batch is on-policy; the second is replayed
        metrics = learn(batches)
    assert PRIORITIES not in metrics
    assert metrics['replay/is_weight_mean'] <= 1.0
    updater.flush()
    after = _priorities(wired.client, tables.REPLAY, count)
    changed = {k: v for k, v in after.items() if v != before[k]}
    assert changed, 'no priority changed'
    # The largest priority written so far: an item written twice may hold a smaller now.
    assert updater.max_priority >= max(max(changed.values()), INITIAL_PRIORITY) - 1e-6
