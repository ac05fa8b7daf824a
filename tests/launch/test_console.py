"""The first thing a user runs: README's first command, on a terminal and through a pipe.

The console shows progress and no native noise (`launch/console.py`), and a
second identical run gets a directory of its own (`runs/...`) without
touching the first one's.
"""

import fcntl
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
import threading

from reverb_agents.launch import console

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHORT = ['--num_steps=3000', '--eval_episodes=2']  # flags after the command override it
NOISE = ('[reverb/cc', 'Unable to register', 'cuda_dnn', 'cuda_fft', 'cuda_blas',
         'pending items alarmingly high', 'TF-TRT')


def readme_command() -> list:
    """README's first `python launch/run.py ...` line of the quick start, as argv."""
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    quick = text[text.index('## Quick start'):]
    line = next(line for line in quick.splitlines() if line.startswith('python launch/run.py'))
    return shlex.split(line.split('#', 1)[0])


def run_on_terminal(argv, cwd) -> str:
    """Runs `argv` with stderr on a pseudo-terminal (stdout a pipe); everything printed."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 160, 0, 0))
    process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=secondary)
    os.close(secondary)
    chunks = []

    def read():
        while True:
            try:
                data = os.read(main, 4096)
            except OSError:  # the terminal closed: the process ended
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stdout, _ = process.communicate(timeout=240)
    reader.join(timeout=10)
    os.close(main)
    assert process.returncode == 0, b''.join(chunks).decode(errors='replace')[-3000:]
    return b''.join(chunks).decode(errors='replace') + stdout.decode(errors='replace')


def files(directory) -> dict:
    return {os.path.join(d, n): os.path.getmtime(os.path.join(d, n))
            for d, _, names in os.walk(directory) for n in names}


def test_readme_command_is_quiet_shows_progress_and_keeps_runs_apart(tmp_path):
    argv = readme_command()
    assert argv[:2] == ['python', 'launch/run.py'], argv
    argv = [sys.executable, os.path.join(ROOT, 'launch', 'run.py'), *argv[2:], *SHORT]

    on_terminal = run_on_terminal(argv, tmp_path)
    for noise in NOISE:
        assert noise not in on_terminal, on_terminal[-3000:]
    assert re.search(r'\d+%\|.*env steps', on_terminal), on_terminal[-3000:]  # the tqdm bar
    assert 'preset clear_cartpole;' in on_terminal
    assert 'final evaluation' in on_terminal and 'done:' in on_terminal
    (first,) = os.listdir(tmp_path / 'runs')
    assert re.fullmatch(r'clear-CartPole-v1-\d{8}-\d{6}', first), first
    before = files(tmp_path / 'runs' / first)
    assert any(p.endswith('summary.json') for p in before)

    piped = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert piped.returncode == 0, piped.stderr[-3000:]
    for noise in NOISE:
        assert noise not in piped.stderr, piped.stderr[-3000:]
    assert 'logdir: runs/clear-CartPole-v1-' in piped.stderr
    assert sorted(os.listdir(tmp_path / 'runs'))[0] == first
    assert len(os.listdir(tmp_path / 'runs')) == 2
    assert files(tmp_path / 'runs' / first) == before  # the first run is untouched


def test_only_known_noise_is_filtered():
    assert console.NOISE.search('[reverb/cc/client.cc:165] Sampler and server are owned')
    assert console.NOISE.search('2026-11-24 00:17:20.453646: E external/local_xla/xla/'
                                'stream_executor/cuda/cuda_dnn.cc:9261] Unable to register '
                                'cuDNN factory')
    assert not console.NOISE.search('error: --num_steps must be >= 1')
    assert not console.NOISE.search('Traceback (most recent call last):')
    assert console.verbose_requested(['run.py', '--verbose'])
    assert not console.verbose_requested(['run.py', '--noverbose'])
