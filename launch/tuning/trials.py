"""One trial: an ordinary run (`launch/run.py` in a process of its own), watched.

The trial's command is the study's fixed flags, then its budget and directory
(`--num_steps`, `--logdir=<study>/trial-<n>`, `--eval_every_steps`, `--noexport`,
`--deterministic` unless the study's command says `--nodeterministic`), then the
sampled settings, last, so they win. While it runs, each new row of its
`eval.csv` (a periodic greedy evaluation) is reported to the study; when the
pruner says stop, the run gets SIGINT (it checkpoints and ends as Ctrl-C ends a
run). A run that ends with an error is a failed trial with the run's error line.
"""

import csv
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple

from reverb_agents.launch.evaluation import periodic
from reverb_agents.launch.runs import rundir

POLL_S = 0.5  # how often a running trial's eval.csv is read
STOP_WAIT_S = 120.0  # how long a pruned run may take to checkpoint and end
# The run script: `launch/run.py`'s module, so trials run from a checkout or a wheel.
RUN_MODULE = 'reverb_agents.launch.command_line.train'


class TrialFailed(RuntimeError):
    """The run ended with an error; the message is its error line."""


def eval_rows(logdir: str) -> List[Tuple[int, float]]:
    """(env_steps, return_mean) of `<logdir>/eval.csv`'s rows so far (none yet: [])."""
    path = os.path.join(logdir, periodic.CSV)
    try:
        with open(path, newline='') as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    out = []
    for row in rows:
        try:
            out.append((int(row['env_steps']), float(row['return_mean'])))
        except (KeyError, TypeError, ValueError):
            break  # a row being written
    return out


def error_line(stderr: str) -> str:
    """The run's `error: ...` line, or its last line of output."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith('error:')]
    return (errors or lines or ['the run ended without output'])[-1]


def run(argv: Sequence[str], logdir: str, report: Callable[[int, float], bool],
        log_path: Optional[str] = None) -> Tuple[bool, dict]:
    """Runs `launch/run.py argv` (which must set `--logdir=logdir`); `report(env_steps,
    return_mean)` sees each periodic evaluation once and returns True to stop (prune)
    the run. Returns (pruned, the run's summary.json). Raises TrialFailed with the
    run's error line when it fails (not when it was stopped)."""
    command = [sys.executable, '-m', RUN_MODULE, *argv]
    if log_path:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    log = open(log_path or os.devnull, 'w')
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.PIPE, text=True,
                               start_new_session=True,  # stopped by `_stop`, once
                               preexec_fn=_stop_with_parent)
    seen, pruned = 0, False
    stderr_lines: List[str] = []
    # The run's stderr is drained while it runs: a full pipe would block it.
    drain = threading.Thread(target=lambda: stderr_lines.extend(process.stderr), daemon=True)
    drain.start()
    try:
        while process.poll() is None:
            time.sleep(POLL_S)
            rows = eval_rows(logdir)
            for env_steps, value in rows[seen:]:
                if not pruned and report(env_steps, value):
                    pruned = True
                    process.send_signal(signal.SIGINT)
            seen = len(rows)
        if not pruned:  # evaluations written in the run's last moments
            for env_steps, value in eval_rows(logdir)[seen:]:
                report(env_steps, value)
    except BaseException:
        _stop(process)
        raise
    finally:
        drain.join(timeout=5)
        log.close()
    code = process.returncode
    if code != 0 and not (pruned and code in (130, -signal.SIGINT)):
        raise TrialFailed(error_line(''.join(stderr_lines)))
    return pruned, read_summary(logdir)


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith('linux') else None
_PR_SET_PDEATHSIG = 1


def _stop_with_parent() -> None:
    """In the trial's process before it starts: SIGINT handled again (a study started in
    the background of a shell ignores it, and a child would inherit that), and sent when
    the study's process dies (a killed study leaves no run behind; the run checkpoints).
    System calls only, safe between fork and exec in any thread."""
    if _LIBC is not None:
        _LIBC.signal(int(signal.SIGINT), 0)  # SIG_DFL: Python installs its handler again
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGINT))


def _stop(process: subprocess.Popen) -> None:
    """SIGINT (the run checkpoints), then SIGKILL after `STOP_WAIT_S`."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_summary(logdir: str) -> dict:
    """`<logdir>/summary.json`, or {} where the run wrote none."""
    try:
        with open(os.path.join(logdir, rundir.SUMMARY)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
