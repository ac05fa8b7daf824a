"""Real env steps and episodes across processes: actors report, the learner drains
(real Reverb)."""

import reverb

from reverb_agents.replay import tables
from reverb_agents.replay.env_steps import EnvStepsCounter, EnvStepsReporter


def _server(reverb_server):
    server = reverb_server([reverb.Table.queue(tables.ENV_STEPS, max_size=1000,
                                               signature=tables.ENV_STEPS_SIGNATURE)])
    return reverb.Client(f'localhost:{server.port}')


def test_reports_of_several_actors_add_up_and_are_counted_once(reverb_server):
    client = _server(reverb_server)
    totals = [0, 0]
    reporters = [EnvStepsReporter(client, lambda i=i: totals[i], period_s=60) for i in range(2)]
    counter = EnvStepsCounter(client, refresh_s=0.0)
    assert counter() == 0
    totals[0], totals[1] = 120, 7
    for reporter in reporters:
        reporter.report()
    assert counter() == 127
    reporters[0].report()  # nothing new: no report
    assert client.server_info()[tables.ENV_STEPS].current_size == 0
    totals[0] = 200
    reporters[0].report()
    reporters[0].report()
    assert counter() == 207
    assert counter() == 207  # drained: counted once


def test_a_late_learner_counts_what_was_reported_before_it(reverb_server):
    client = _server(reverb_server)
    total = [50]
    reporter = EnvStepsReporter(client, lambda: total[0], period_s=0.01).start()
    total[0] = 80
    reporter.stop()  # reports what is left at stop
    assert EnvStepsCounter(client, refresh_s=0.0)() == 80


def test_episodes_reach_the_learner_once_each_in_order(reverb_server):
    client = _server(reverb_server)
    total, finished = [0], []
    reporter = EnvStepsReporter(client, lambda: total[0], period_s=60,
                                episodes=lambda: [finished.pop(0) for _ in list(finished)])
    received = []
    counter = EnvStepsCounter(client, refresh_s=0.0,
                              add_episode=lambda r, n: received.append((r, n)))
    total[0], finished[:] = 30, [(9.5, 10), (-1.0, 20)]
    reporter.report()
    finished[:] = [(3.0, 5)]  # an episode without new steps is reported too
    reporter.report()
    reporter.report()  # nothing new: no item
    assert client.server_info()[tables.ENV_STEPS].current_size == 2
    assert counter() == 30
    assert received == [(9.5, 10), (-1.0, 20), (3.0, 5)]
    assert counter() == 30 and len(received) == 3
