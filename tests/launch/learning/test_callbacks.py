"""The Python API's callbacks (`launch/learning/callbacks.py`) on events made by hand: which
method each event reaches, how a stop is asked for and that it stays, EarlyStopping's
patience and target. Real runs with callbacks: tests/launch/test_api.py."""

import pytest

from reverb_agents.launch.learning.callbacks import (Callback, EarlyStopping, EvaluationResult,
                                                     RunEvents, StopTraining)


def evaluation(mean: float, env_steps: int = 1000) -> EvaluationResult:
    return EvaluationResult(env_steps, mean, 0.0, False, mean, False, 'run')


@pytest.mark.parametrize('returns,patience,min_delta,target,stops_at', [
    ([1, 2, 3, 4, 5], 2, 0.0, None, None),  # always better
    ([5, 4, 4, 6, 6, 6], 2, 0.0, None, 2),  # two without a better one
    ([5, 4, 6, 5.5, 6.2], 2, 0.5, None, 4),  # 6.2 is not 0.5 better than 6
    ([5, 4, 4, 4], 3, 0.0, None, 3),
    ([10, 200, 500, 100], 5, 0.0, 500, 2),  # the target
    ([10, 20, 30], 5, 0.0, 500, None),
])
def test_early_stopping(returns, patience, min_delta, target, stops_at):
    stopping = EarlyStopping(patience=patience, min_delta=min_delta, target=target)
    answers = [stopping.on_evaluation(evaluation(r)) for r in returns]
    first_stop = answers.index(False) if False in answers else None
    assert first_stop == stops_at, answers


def test_early_stopping_needs_patience():
    with pytest.raises(ValueError, match='patience must be >= 1'):
        EarlyStopping(patience=0)


class Recorder(Callback):
    def __init__(self, stop_on=None):
        self.seen, self.stop_on = [], stop_on

    def on_evaluation(self, event):
        self.seen.append(('evaluation', event))
        if self.stop_on == 'evaluation':
            raise StopTraining

    def on_checkpoint(self, event):
        self.seen.append(('checkpoint', event))
        return self.stop_on != 'checkpoint'


def test_events_reach_their_methods_and_a_stop_stays():
    plain, recorder, other = [], Recorder(stop_on='checkpoint'), Recorder()
    events = RunEvents([plain.append, recorder, other], 'run')
    assert not events.evaluation(2000, 1.5, 0.5, True, 1.5, False)
    assert events.checkpoint(2000, 10, 'run/checkpoints/ckpt-10')  # the recorder stops
    # After the stop every callback still sees the run's last events.
    assert events.evaluation(2100, 2.0, 0.0, True, 2.0, True) and events.stopped
    assert [kind for kind, _ in other.seen] == ['evaluation', 'checkpoint', 'evaluation']
    assert other.seen[1][1].path == 'run/checkpoints/ckpt-10'
    assert other.seen[2][1].final and other.seen[2][1].logdir == 'run'
    assert recorder.seen == other.seen
    assert plain == []  # a plain callable is called on progress rows only


def test_stop_training_raised_by_a_callback_stops():
    events = RunEvents([Recorder(stop_on='evaluation')], 'run')
    assert events.evaluation(1000, 0.0, 0.0, True, 0.0, False) and events.stopped


def test_a_callback_that_is_not_callable_is_refused():
    with pytest.raises(ValueError, match='a callback must be a Callback or callable'):
        RunEvents([object()], 'run')
