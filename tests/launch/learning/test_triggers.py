"""Tests for launch/learning/triggers.py's stop at the target return."""

from reverb_agents.launch.acting.actor import EpisodeStats
from reverb_agents.launch.learning.triggers import TARGET_WINDOW, TargetCheck


def _episodes(stats, n, episode_return):
    for _ in range(n):
        stats.add_episode(episode_return, 10)


def test_no_target_never_stops():
    stats = EpisodeStats()
    _episodes(stats, TARGET_WINDOW, 500.0)
    assert not TargetCheck(None)(stats)


def test_training_mean_alone_stops_at_the_target():
    check, stats = TargetCheck(475.0), EpisodeStats()
    _episodes(stats, TARGET_WINDOW - 1, 500.0)
    assert not check(stats)  # fewer than TARGET_WINDOW episodes
    _episodes(stats, 1, 400.0)
    assert check(stats)  # (19 * 500 + 400) / 20 = 495
    _episodes(stats, 5, 100.0)
    assert not check(stats)


def test_greedy_check_must_agree_and_waits_for_more_episodes_after_failing():
    greedy_returns = [300.0, 490.0]
    calls = []

    def greedy():
        calls.append(stats.num_episodes)
        return greedy_returns[len(calls) - 1]

    check, stats = TargetCheck(475.0, greedy), EpisodeStats()
    _episodes(stats, TARGET_WINDOW, 480.0)
    assert not check(stats) and check.greedy_return == 300.0
    _episodes(stats, TARGET_WINDOW - 1, 480.0)
    assert not check(stats)  # no second evaluation before 20 more episodes
    assert calls == [TARGET_WINDOW]
    _episodes(stats, 1, 480.0)
    assert check(stats) and check.greedy_return == 490.0
    assert calls == [TARGET_WINDOW, 2 * TARGET_WINDOW]
