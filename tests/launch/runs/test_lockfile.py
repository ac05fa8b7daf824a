"""One run per logdir (`launch/runs/lockfile.py`): a second run is one `error:` line while
the first lives; the lock a killed run leaves is taken over."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reverb_agents.agents.clear.config import CLEARConfig
from reverb_agents.launch.runs import lockfile, rundir
from reverb_agents.launch.runs.options import RunOptions

SMALL = ['--agent=clear', '--env=CartPole-v1', '--num_envs=4', '--lstm_size=0',
         '--hidden_sizes=16', '--batch_size=8', '--unroll_length=5', '--min_replay_size=8',
         '--queue_size=16', '--eval_episodes=2', '--noexport']


def lock_record(logdir) -> dict:
    with open(os.path.join(logdir, lockfile.LOCK_FILE)) as f:
        return json.load(f)


def wait_for_lock(logdir, process, timeout_s: float = 120) -> dict:
    """The lock record once `process` (a `subprocess.Popen` or a `tests.forked.Forked`)
    holds the lock."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, ''.join(process.stdout)[-3000:]
        try:
            record = lock_record(logdir)
            if record.get('pid') == process.pid:
                return record
        except (OSError, ValueError):  # not there yet, or being written
            pass
        time.sleep(0.1)
    raise AssertionError('the first run never took the lock')


@pytest.fixture
def holder(tmp_path):
    """A process holding `tmp_path/run`'s lock, the lock module alone (no TensorFlow)."""
    logdir = str(tmp_path / 'run')
    code = textwrap.dedent(f'''
        import time
        from reverb_agents.launch.runs import lockfile
        lock = lockfile.acquire({logdir!r}, command='holder.py')
        time.sleep(600)
    ''')
    process = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_lock(logdir, process, timeout_s=30)
        yield logdir, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_a_live_holder_refuses_others_and_a_killed_ones_lock_is_taken_over(holder):
    logdir, process = holder
    in_use = f'{logdir} is in use by holder.py pid {process.pid} (started '
    with pytest.raises(rundir.TrainingError) as refused:
        rundir.lock_logdir(logdir)
    assert str(refused.value).startswith(in_use)
    assert str(refused.value).endswith('); wait for it or choose another --logdir')
    for resume in (False, True):  # the start checks say so before anything else
        with pytest.raises(rundir.TrainingError, match='is in use by holder.py'):
            rundir.check_start(logdir, resume, RunOptions(logdir=logdir), CLEARConfig())
    assert lock_record(logdir)['pid'] == process.pid  # the refusals changed nothing

    process.send_signal(signal.SIGKILL)  # no clean release: the file stays
    process.wait()
    assert lock_record(logdir)['pid'] == process.pid
    rundir.check_free(logdir)  # stale: its flock went with its process
    with rundir.lock_logdir(logdir) as lock:
        assert lock.took_over['pid'] == process.pid
        assert lock_record(logdir)['pid'] == os.getpid()
        with pytest.raises(rundir.TrainingError, match=f'in use by .* pid {os.getpid()}'):
            rundir.lock_logdir(logdir)  # another descriptor, even in this process
    assert not os.path.exists(os.path.join(logdir, lockfile.LOCK_FILE))  # released


def test_a_second_run_is_one_error_line_while_the_first_lives(tmp_path, run_cli, start_script):
    logdir = str(tmp_path / 'run')
    first = start_script('run', ['--no_preset', f'--logdir={logdir}', *SMALL,
                                 '--num_steps=100000000'])
    try:
        record = wait_for_lock(logdir, first)
        second = run_cli([*SMALL, '--num_steps=1000', '--resume'], logdir=logdir)
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: its lock file stays behind
        first.wait()
    assert second.returncode == 1
    assert second.errors == [
        f'error: {logdir} is in use by run.py pid {first.pid} (started {record["started"]}); '
        'wait for it or choose another --logdir'], second.stderr[-3000:]
    # The crash left its lock file; the resume that takes it over is a real run in
    # tests/launch/runs/test_checkpoint_pairs.py.
    assert lock_record(logdir)['pid'] == first.pid
    rundir.check_free(logdir)  # stale: nothing holds its flock
