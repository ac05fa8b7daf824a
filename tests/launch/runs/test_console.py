"""The first thing a user runs: README's first command, on a terminal and through a pipe.

The console shows progress and no native noise (`launch/runs/console.py`), and a
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

from reverb_agents.launch.runs import console

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Flags after the command override it: a budget just past one round of the preset's
# 64 environments x 20 steps (the learner's first batches come from it).
SHORT = ['--num_steps=1500', '--eval_episodes=2']
NOISE = ('[reverb/cc', 'Unable to register', 'cuda_dnn', 'cuda_fft', 'cuda_blas',
         'pending items alarmingly high', 'TF-TRT')



def _read_terminal(fd: int, chunks: list) -> None:
    """Appends what a pseudo-terminal's main side `fd` gives until its process ends."""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # the terminal closed: the process ended
            return
        if not data:
            return
        chunks.append(data)

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
    reader = threading.Thread(target=_read_terminal, args=(main, chunks), daemon=True)
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
    frames = [f.strip() for f in on_terminal.split('\r') if re.search(r'\d+%\|', f)]
    assert frames[-1].startswith('100%|'), frames[-3:]  # the run spent its budget
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


def test_the_bar_ends_at_the_runs_final_count(capsys):
    """A 30k-step run whose last refresh came at 74%: closing with the run's final total
    (the learner loop's `display.close(total_env_steps)`) leaves the bar at 100%."""
    def last_frame(final_count):
        display = console.ProgressDisplay(30_000, use_bar=True)
        display.update(22_200, 1500.0, 300, 20.0, 150.0, 12)
        display.close(final_count)
        frames = [f for f in capsys.readouterr().err.split('\r') if '%|' in f]
        return frames[-1].strip()

    assert last_frame(None).startswith('74%|')  # the last update's count, not the run's
    final = last_frame(30_000)
    assert final.startswith('100%|') and '30.0k/30.0k env steps' in final, final
    assert console._bar is None  # status lines print plainly again


def test_plain_lines_end_with_the_final_count_once(capsys):
    display = console.ProgressDisplay(30_000, interval_s=0.0, use_bar=False)
    display.update(22_200, 1500.0, 300, 20.0, 150.0, 12)
    display.update(30_000, 1500.0, 400, 20.0, 160.0, 15)
    display.close(30_000)  # the last line gave it already
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(' (')[0] for line in lines] == ['env steps 22200 of 30000',
                                                        'env steps 30000 of 30000']
    display = console.ProgressDisplay(30_000, interval_s=3600.0, use_bar=False)
    display.update(22_200, 1500.0, 300, 20.0, 150.0, 12)  # within the interval: no line
    display.close(30_000)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith('env steps 30000 of 30000 (100%, 1500/s') and 'episodes 12' in line


def test_a_terminal_of_zero_columns_gets_plain_lines():
    """Some terminals (serial consoles, containers) report 0 x 0, where tqdm draws
    nothing: the display writes the plain lines it writes off a terminal."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack('HHHH', 0, 0, 0, 0))
    code = ('from reverb_agents.launch.runs import console\n'
            'display = console.ProgressDisplay(1000, interval_s=0.0)\n'
            'display.update(500, 100.0, 5, 1.0, 9.5, 3)\n'
            'display.close(1000)\n')
    process = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=secondary)
    os.close(secondary)
    chunks = []
    _read_terminal(main, chunks)
    os.close(main)
    assert process.wait(timeout=60) == 0
    text = b''.join(chunks).decode(errors='replace')
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert '%|' not in text and [line.split(' (')[0] for line in lines] == [
        'env steps 500 of 1000', 'env steps 1000 of 1000'], lines
    assert lines[-1].startswith('env steps 1000 of 1000 (100%'), lines


NOISY_IMPORT = '''
import os, sys
from reverb_agents.launch.runs import console
with console.native_noise_filtered():
    os.write(2, b'2026-11-25 E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] '
                b'Unable to register cuDNN factory\\n')
    os.write(2, b'a line of the caller\\n')
    print('python stderr inside', file=sys.stderr, flush=True)
os.write(2, b'cuda_dnn.cc after the block: the caller\\'s own\\n')
print('stdout', os.fstat(2).st_ino == int(sys.argv[1]))
'''


def test_the_python_api_imports_quietly_and_leaves_stderr_alone(tmp_path):
    """`from reverb_agents import train, load_policy` in a fresh process: no native noise
    line (TensorFlow's CUDA factories, oneDNN, cudart_stub, CPU features, TF-TRT), and the
    filter is gone once the API is loaded: descriptor 2 is the caller's again."""
    env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
    api = subprocess.run(
        [sys.executable, '-c', 'from reverb_agents import train, load_policy\n'
                               'from reverb_agents.launch import train as launch_train\n'
                               'import sys; print("api", train is launch_train, file=sys.stderr)'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert api.returncode == 0, api.stderr[-3000:]
    noisy = [line for line in api.stderr.splitlines()
             if console.NOISE.search(line) or any(n in line for n in NOISE)]
    assert not noisy and 'api True' in api.stderr, api.stderr[-3000:]

    # The filter on its own: noise dropped, the rest passed, descriptor 2 restored.
    with open(tmp_path / 'stderr', 'w') as stderr:
        inode = os.fstat(stderr.fileno()).st_ino
        block = subprocess.run([sys.executable, '-c', NOISY_IMPORT, str(inode)], stderr=stderr,
                               stdout=subprocess.PIPE, text=True, timeout=60)
    assert block.returncode == 0 and block.stdout == 'stdout True\n'
    assert (tmp_path / 'stderr').read_text().splitlines() == [
        'a line of the caller', 'python stderr inside',
        "cuda_dnn.cc after the block: the caller's own"]


def test_plot_imports_no_tensorflow(tmp_path, fresh_python):
    """`launch/tools/plot.py` reads progress.csv and run_config.json itself (the writers
    import TensorFlow): a figure from a run directory, with TensorFlow never loaded."""
    run = tmp_path / 'run'
    run.mkdir()
    (run / 'progress.csv').write_text(
        'env_steps,learner_steps,wall_time_s,return_mean,return_std,episodes,loss\n'
        '100,1,0.5,,,0,1.0\n200,2,1.0,12.0,1.0,4,0.9\n300,3,1.5,20.0,2.0,9,0.8\n')
    (run / 'run_config.json').write_text(
        '{"agent": "clear", "env": "CartPole-v1", "config": {"replay_fraction": 0.5, '
        '"replay": {"replay_size": 5000}}, "env_options": {}, "seed": 3}')
    code = ('import runpy, sys\n'
            f'sys.argv = ["plot.py", {str(run)!r}, "--group_by=replay_size", '
            f'"--output={tmp_path / "curve.png"}"]\n'
            'try:\n'
            '    runpy.run_module("reverb_agents.launch.tools.plot", run_name="__main__")\n'
            'except SystemExit as e:\n'
            '    assert not e.code, e.code\n'
            'print(sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))\n')
    assert fresh_python(code) == [str(tmp_path / 'curve.png'), '[]']
    assert (tmp_path / 'curve.png').read_bytes()[:4] == b'\x89PNG'
