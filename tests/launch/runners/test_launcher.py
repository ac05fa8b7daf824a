"""`--launcher=multiprocess` and the roles, as real OS processes on loopback:
actors, learner and replay server killed mid-run, resumption, bad input. The
learner-kill run also holds the roles to `launch/runners/isolation.py`'s network namespace,
with `tests/launch/runners/test_isolation.py`'s checks."""

import ast
import json
import os
import re
import signal
import subprocess
import time

import pytest

from reverb_agents.launch.runners import launcher
from reverb_agents.replay import connection
from tests import forked
from tests.conftest import SAC_FEED_FORWARD_FLAGS
from tests.launch.runners import test_isolation as network_checks


# A small CLEAR on CartPole: the point here is the processes, not the learning.
SMALL = ['--agent=clear', '--env=CartPole-v1', '--num_envs=4', '--lstm_size=8',
         '--hidden_sizes=16', '--batch_size=8', '--unroll_length=5', '--min_replay_size=8',
         '--queue_size=16', '--eval_episodes=2', '--log_interval_s=0.5',
         '--checkpoint_interval_s=1', '--replay_checkpoint_interval_s=1',
         '--connect_timeout_s=120']  # the roles start slowly on a loaded machine
LEARNER_STEPS = re.compile(r'^\[learner\] .*env steps (\d+) .*learner steps (\d+) ')
TIMEOUT_S = 240



class LauncherRun:
    """`run.py --launcher=multiprocess` in the background (forked: `start_script`), its
    output collected."""

    def __init__(self, start_script, logdir, *args):
        self.process = start_script(
            'run', ['--launcher=multiprocess', '--no_preset', f'--logdir={logdir}', *args])
        self._output = forked.Output(self.process.stdout)
        self.lines = self._output.lines

    def wait_for(self, pattern, timeout_s=TIMEOUT_S, start=0):
        """(index, match) of the first line from `start` on matching `pattern`."""
        try:
            return self._output.wait_for(pattern, timeout_s, start)
        except AssertionError:
            raise AssertionError(f'no line matching {pattern!r}; output:\n' +
                                 self.output()) from None

    def pid(self, child):
        """The pid of the last start of `child` ('replay', 'learner', 'actor 0', ...)."""
        pids = [int(m.group(1)) for l in self.lines
                for m in [re.search(rf'started {child} \(pid (\d+),', l)] if m]
        assert pids, f'{child} never started'
        return pids[-1]

    def learner_steps(self):
        """(env steps, learner steps) of every learner progress line, in order."""
        return [(int(m.group(1)), int(m.group(2))) for l in self.lines
                for m in [LEARNER_STEPS.search(l)] if m]

    def finish(self, timeout_s=TIMEOUT_S):
        """The exit status, once every line of the output is read (the process ends
        before the reader's last read of its output)."""
        try:
            returncode = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError('the launcher did not finish; output:\n' + self.output())
        self._output.wait_end()
        return returncode

    def output(self, lines=150):
        """The last `lines` lines, without Reverb's routine checkpoint and writer chatter."""
        noise = ('pending items', 'Stored checkpoint', 'records have been read', 'tfrecord_checkpointer')
        return '\n'.join([l for l in self.lines if not any(n in l for n in noise)][-lines:])

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def runs(start_script):
    """Starts LauncherRuns; kills any still running at the end of the test."""
    started = []

    def start(logdir, *args):
        run = LauncherRun(start_script, logdir, *args)
        started.append(run)
        return run

    yield start
    for run in started:
        run.kill()


def tables(match):
    """The `replay` table's size in a match of the replay role's 'tables hold {...}' (or held)."""
    return ast.literal_eval(match.group(1))['replay']


def latest_checkpoint_step(directory):
    """The learner step of the newest checkpoint named in `directory/checkpoint`."""
    with open(os.path.join(directory, 'checkpoint')) as f:
        return int(re.search(r'ckpt-(\d+)', f.readline()).group(1))


def read_summary(logdir):
    with open(os.path.join(logdir, 'summary.json')) as f:
        return json.load(f)


def test_killed_actor_and_replay_server_are_restarted_and_the_run_completes(runs, tmp_path):
    """One run, two faults: an actor killed (restarted, acting again) and, while it
    restarts, the replay server killed (restarted from its checkpoint; the learner and
    the actor that lived through it reconnect). Overlapping the restarts keeps the
    steps taken before the kills, and so the budget, small."""
    logdir = str(tmp_path / 'run')
    # Both kills land within a second or two of the learner's first step (hundreds to a
    # few thousand env steps); the rest of the budget, on the restarted server, leaves
    # actor 0 seconds to start again and act before the run ends.
    budget = 10000  # margin for the restarted actor 0 to act before the end
    run = runs(logdir, *SMALL, '--num_actors=2', f'--num_steps={budget}', '--noexport')
    run.wait_for(LEARNER_STEPS.pattern)
    _, checkpointed = run.wait_for(r"replay checkpoint .*tables held (\{.*'replay': [1-9].*\})")
    held = tables(checkpointed)
    os.kill(run.pid('actor 0'), signal.SIGKILL)
    killed, _ = run.wait_for(r'actor 0 exited with signal 9; restarting')
    os.kill(run.pid('replay'), signal.SIGKILL)
    i, _ = run.wait_for(r'replay exited with signal 9; restarting', start=killed)
    before = run.learner_steps()
    assert not before or before[-1][0] < budget, 'killed too late to tell: ' + run.output()
    served_at, served = run.wait_for(r'replay server on port \d+; tables hold (\{.*\})', start=i)
    # At least what the checkpoint seen before the kill held (a later one may have followed).
    assert tables(served) >= held

    # The new actor 0 acts and writes (its own progress line counts its steps).
    i, _ = run.wait_for(r'started actor 0 \(pid \d+, start 2\)')
    run.wait_for(r'^\[actor 0\] .*actor 0: env steps [1-9]', start=i)
    # Actor 1 carries on with the new server: its watchdog may see the outage (it then
    # logs 'was away; reconnecting'), or, when the restart beats the watchdog's poll,
    # Reverb's writer reconnects by itself; either way its count moves on.
    actor_1 = r'^\[actor 1\] .*actor 1: env steps (\d+)'
    last_before = max([int(m.group(1)) for line in run.lines[:served_at]
                       for m in [re.search(actor_1, line)] if m], default=0)
    i = served_at
    while True:
        i, moved = run.wait_for(actor_1, start=i + 1)
        if int(moved.group(1)) > last_before:
            break
    assert run.finish() == 0, run.output()
    after = [s for line in run.lines[served_at:] for m in [LEARNER_STEPS.search(line)] if m
             for s in [int(m.group(2))]]
    assert after and after[-1] > (before[-1][1] if before else 0), run.output()
    summary = read_summary(logdir)
    assert summary['env_steps'] >= budget
    steps = [s for _, s in run.learner_steps()]
    assert len(steps) >= 3 and steps == sorted(steps), steps
    assert summary['learner_steps'] >= steps[-1]
    exits = [l for l in run.lines if re.search(r'(actor \d|learner) exited', l)]
    assert exits == [l for l in exits if 'actor 0 exited with signal 9' in l], exits
    assert len(exits) == 1 and not [l for l in run.lines if 'Traceback' in l], run.output()


def test_killed_learner_resumes_from_its_checkpoint(runs, tmp_path):
    logdir = str(tmp_path / 'run')
    args = [*SMALL, '--num_actors=1', '--num_steps=1000000']
    first = runs(logdir, *args)
    first.wait_for(r'^\[learner\] env steps [1-9]\d* of .*learner steps [1-9]')
    # Training, every role in the launcher's network namespace (loopback only), none in
    # this machine's: nothing the run listens on is reachable from outside it.
    probe = tmp_path / 'probe'
    probe.mkdir()
    if network_checks._probe(probe, 'plain')['reason'] is None:  # else no namespaces here
        tree = network_checks.process_tree(first.process.pid)
        held = network_checks.socket_inodes(tree)
        exposed = {inode: where for inode, where in network_checks.listening().items()
                   if inode in held}
        assert first.process.poll() is None, first.output()
        assert len(tree) >= 4, tree  # the launcher, the replay server, the learner, an actor
        assert not exposed, exposed
        namespaces = {os.readlink(f'/proc/{pid}/ns/net') for pid in tree}
        assert len(namespaces) == 1 and namespaces != {os.readlink('/proc/self/ns/net')}
        first.wait_for(r'^\[replay\] network: isolated \(loopback only\)')
    # Wait for a learner checkpoint and a replay checkpoint holding replayed items.
    checkpoints = os.path.join(logdir, 'checkpoints')
    deadline = time.monotonic() + TIMEOUT_S
    while not os.path.exists(os.path.join(checkpoints, 'checkpoint')):
        assert time.monotonic() < deadline and first.process.poll() is None, first.output()
        time.sleep(0.2)
    first.wait_for(r"replay checkpoint .*'replay': [1-9]")
    os.kill(first.pid('learner'), signal.SIGKILL)
    assert first.finish() == 1
    assert 'error: the learner exited with signal 9' in first.output()
    # The replay server checkpointed its tables at shutdown: their last sizes.
    replay_size = [tables(m) for l in first.lines
                   for m in [re.search(r'replay checkpoint .*tables held (\{.*\})', l)] if m][-1]
    ckpt_step = latest_checkpoint_step(checkpoints)
    assert ckpt_step > 0

    second = runs(logdir, *args, '--resume')
    _, resumed = second.wait_for(r'Resumed from .* at learner step (\d+), env step (\d+)')
    assert int(resumed.group(1)) == ckpt_step
    assert int(resumed.group(2)) > 0
    _, served = second.wait_for(r'replay server on port \d+; tables hold (\{.*\})')
    assert tables(served) == replay_size
    i, _ = second.wait_for(LEARNER_STEPS.pattern)
    env_steps, learner_steps = second.learner_steps()[0]
    assert learner_steps >= ckpt_step and env_steps >= int(resumed.group(2))
    second.process.send_signal(signal.SIGTERM)
    assert second.finish() == 0, second.output()
    # SIGTERM: the learner checkpointed on its way out, at the step its log line names and
    # no earlier than its last progress line (a signal arriving during a write to stderr
    # must not kill it first: `roles.stop_on_signals`).
    stopped = [int(m.group(1)) for l in second.lines
               for m in [re.search(r'stopped at learner step (\d+)', l)] if m]
    assert stopped and stopped[-1] >= second.learner_steps()[-1][1], second.output()
    assert latest_checkpoint_step(checkpoints) == stopped[-1], second.output()


@pytest.mark.parametrize('agent_args', [
    ['--agent=acer', '--num_envs=4', '--lstm_size=8', '--hidden_sizes=16', '--batch_size=4',
     '--unroll_length=5', '--replay_start_size=100', '--num_steps=20000',
     '--target_return=5'],
    # Feed-forward: the ratio below counts one update per env step; a recurrent actor's
    # sequences of 16 steps per environment leave more of a short run in flight.
    ['--agent=sac', '--env=Pendulum-v1', '--num_envs=4', '--hidden_sizes=16',
     '--critic_hidden_sizes=16', '--batch_size=32', '--num_steps=1200',
     *SAC_FEED_FORWARD_FLAGS],
], ids=['acer', 'sac'])
def test_every_agent_runs_multiprocess(runs, tmp_path, agent_args):
    logdir = str(tmp_path / 'run')
    run = runs(logdir, *agent_args, '--num_actors=1', '--eval_episodes=1', '--log_interval_s=1',
               '--connect_timeout_s=120')
    assert run.finish() == 0, run.output()
    summary = read_summary(logdir)
    assert summary['learner_steps'] > 0 and summary['saved_model']
    # The actors' episodes reach the learner: its training return, curve and progress.csv.
    assert summary['train_return_last20'] is not None
    assert os.path.exists(os.path.join(logdir, 'progress.csv'))
    if summary['agent'] == 'acer':  # a target any CartPole policy reaches: stopped early
        assert summary['reached_target'] and summary['env_steps'] < 20000, summary
    if summary['agent'] == 'sac':
        # One update per env step after the warm-up, held by the rate limiter across processes.
        config = summary['config']
        expected = (summary['env_steps'] - config['learning_starts']) * config['updates_per_step']
        assert abs(summary['learner_steps'] - expected) <= 0.1 * expected, summary


@pytest.mark.parametrize('args,message', [
    (['--role=learner', '--replay_address=127.0.0.1:{port}', '--connect_timeout_s=1'],
     'no Reverb server answered at 127.0.0.1:{port} within 1 s'),
    (['--role=actor', '--replay_address=127.0.0.1:{port}', '--connect_timeout_s=1'],
     'no Reverb server answered at 127.0.0.1:{port} within 1 s'),
    (['--launcher=multiprocess', '--num_actors=0'], '--num_actors must be >= 1'),
    (['--role=judge'], "unknown --role='judge'"),
])
def test_bad_input_is_one_clear_line_within_30_s(args, message, run_cli):
    port = launcher.free_port()
    start = time.monotonic()
    result = run_cli([a.format(port=port) for a in args], timeout=60)
    assert time.monotonic() - start < 30
    assert result.returncode == 1, result.stderr[-2000:]
    errors = result.errors
    assert len(errors) == 1 and message.format(port=port) in errors[0], result.stderr[-2000:]
    assert 'Traceback' not in result.stderr


@pytest.mark.parametrize('role', ['actor', 'learner'])
def test_role_exits_with_one_error_when_the_server_stays_away(role, tmp_path, error_lines,
                                                              start_script):
    port = launcher.free_port()
    logdir = f'--logdir={tmp_path}/run'
    replay = start_script('run', ['--role=replay', f'--replay_port={port}', logdir, *SMALL])
    try:
        connection.wait_for_server(f'127.0.0.1:{port}', 60)
        # Without a learner (or actors) the role waits on weights (or data); the
        # watchdog notices the server even then.
        child = start_script('run', [f'--role={role}', f'--replay_address=127.0.0.1:{port}',
                                     '--reconnect_timeout_s=3', logdir, *SMALL])
        output = forked.Output(child.stdout)  # stdout and stderr
        # Connected and waiting (starting takes seconds more on a loaded machine).
        output.wait_for('watching the Reverb server', timeout_s=90)
        assert child.poll() is None
        replay.kill()
        child.wait(timeout=60)
        output.wait_end()
        stderr = output.text()
    finally:
        replay.kill()
    assert child.returncode == 1, stderr[-2000:]
    assert error_lines(stderr) == [
        f'error: the Reverb server at 127.0.0.1:{port} has not answered for 3 s'], stderr[-2000:]
