"""What a run shows on the terminal: native noise filtered, one progress display,
status lines, a final table.

- **Native output.** TensorFlow's CUDA start-up errors and Reverb's C++ log
  lines (`[reverb/cc/...]`, "pending items alarmingly high") are written by
  C++ straight to file descriptor 2, past Python's `sys.stderr`.
  `quiet_native_output` puts a pipe on descriptor 2 and a thread that copies
  every line to the terminal except those matching `NOISE`; Python's own
  `sys.stderr` is rebound to the original descriptor, so Python's messages
  (errors, progress, tracebacks) never wait on that thread nor get lost when
  a process ends with `os._exit`. `--verbose` leaves descriptor 2 alone.
  This module imports nothing heavy: `launch/run.py` calls it before
  TensorFlow is imported, whose CUDA messages come at import.
- **Progress.** On a terminal, one tqdm bar (env steps, percent, ETA,
  env steps/s, learner steps/s, recent mean return); elsewhere (a pipe, a
  log file, the multi-process launcher's children) one plain line per log
  interval with the same numbers.
- **Status lines** (`status`): one line per checkpoint, evaluation and
  finishing stage, printed above the bar.
"""

import os
import re
import sys
import threading
import time
from typing import Optional, Sequence

NOISE = re.compile(
    r'\[reverb/cc/'
    r'|Unable to register cu(DNN|FFT|BLAS) factory'
    r'|cuda_(dnn|fft|blas|driver|executor)\.cc'
    r'|computation placer already registered'
    r'|TF-TRT Warning'
    r'|Could not find cuda drivers'
    r'|oneDNN custom operations'
    r'|This TensorFlow binary is optimized'
    r'|rebuild TensorFlow with the appropriate compiler flags'
    r'|pending items alarmingly high')

_installed = False
_quiet = True  # status lines only; `set_verbose` adds absl's INFO logging


def verbose_requested(argv: Sequence[str]) -> bool:
    """True when the command line asks for `--verbose` (read before flags are parsed)."""
    return any(arg in ('--verbose', '--verbose=true', '--verbose=1', '--verbose=True')
               for arg in argv)


def quiet_native_output() -> None:
    """Filters `NOISE` out of what is written to file descriptor 2 (see the module doc)."""
    global _installed
    if _installed:
        return
    try:
        terminal = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:
        return
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr = os.fdopen(terminal, 'w', buffering=1, closefd=False)
    _installed = True

    def copy() -> None:
        with os.fdopen(read_end, 'rb') as lines:
            for line in lines:
                if not NOISE.search(line.decode('utf-8', 'replace')):
                    os.write(terminal, line)

    threading.Thread(target=copy, name='native_output', daemon=True).start()


def set_verbose(verbose: bool) -> None:
    global _quiet
    _quiet = not verbose


def is_verbose() -> bool:
    return not _quiet


_bar = None  # the progress display now shown, if any


def status(message: str) -> None:
    """One line for the user (above the progress bar when one is shown)."""
    if _bar is not None:
        _bar.write(message)
    else:
        print(message, file=sys.stderr, flush=True)


def _count(n: float) -> str:
    return f'{n:,.0f}'


class ProgressDisplay:
    """The run's progress: a tqdm bar on a terminal, plain lines every `interval_s` elsewhere."""

    def __init__(self, total_env_steps: int, start_env_steps: int = 0, interval_s: float = 5.0,
                 use_bar: Optional[bool] = None):
        global _bar
        self.total, self.interval_s = total_env_steps, interval_s
        self._last_line = time.monotonic()
        if use_bar is None:
            use_bar = sys.stderr.isatty()
        self._bar = None
        if use_bar:
            from tqdm import tqdm
            try:
                width = os.get_terminal_size(sys.stderr.fileno()).columns
            except (OSError, ValueError):
                width = 0
            self._bar = tqdm(total=total_env_steps, initial=start_env_steps, unit=' env steps',
                             unit_scale=True, ncols=width or 120, file=sys.stderr,
                             mininterval=0.5, smoothing=0.1,
                             bar_format='{percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} '
                                        'env steps [{elapsed}<{remaining}{postfix}]')
            _bar = self._bar

    def update(self, env_steps: int, env_steps_per_s: float, learner_steps: int,
               learner_steps_per_s: float, recent_return: float, episodes: int) -> None:
        """The numbers now: totals (earlier runs of the logdir included) and this run's rates."""
        returns = f'{recent_return:.1f}' if episodes else '-'
        if self._bar is not None:
            self._bar.set_postfix_str(
                f'{_count(env_steps_per_s)} env steps/s, {learner_steps_per_s:.1f} learner '
                f'steps/s, return {returns}', refresh=False)
            self._bar.update(max(0, min(env_steps, self.total) - self._bar.n))
            return
        now = time.monotonic()
        if now - self._last_line < self.interval_s:
            return
        self._last_line = now
        left = max(0, self.total - env_steps)
        eta = f'{left / env_steps_per_s:.0f} s' if env_steps_per_s > 0 else '?'
        # Plain integers: scripts and tests read these lines.
        status(f'env steps {env_steps} of {self.total} '
               f'({100 * min(env_steps, self.total) / self.total:.0f}%, '
               f'{env_steps_per_s:.0f}/s, ETA {eta})  learner steps {learner_steps} '
               f'({learner_steps_per_s:.1f}/s)  return (last 20) {returns}  episodes {episodes}')

    def close(self) -> None:
        global _bar
        if self._bar is not None:
            self._bar.close()
            if _bar is self._bar:
                _bar = None
            self._bar = None


def table(rows: Sequence[Sequence[str]]) -> str:
    """Two columns, the first padded: the run's final table."""
    width = max(len(key) for key, _ in rows)
    return '\n'.join(f'  {key:<{width}}  {value}' for key, value in rows)
