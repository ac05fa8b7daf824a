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
  TensorFlow is imported, whose CUDA messages come at import. The Python API
  filters only while it imports TensorFlow (`native_noise_filtered`), then
  gives descriptor 2 back.
- **Progress.** On a terminal, one tqdm bar (env steps, percent, ETA,
  env steps/s, learner steps/s, recent mean return); elsewhere (a pipe, a
  log file, the multi-process launcher's children, a terminal that reports 0
  columns) one plain line per log interval with the same numbers. Closing
  with the run's final count shows it (100% at the budget).
- **Status lines** (`status`): one line per checkpoint, evaluation and
  finishing stage, printed above the bar.
- **Imports frozen** (`freeze_imports`): every script, once its imports are
  done, moves what they created out of the garbage collector's reach.
"""

import contextlib
import gc
import os
import re
import sys
import threading
import time
from typing import Iterator, Optional, Sequence, TextIO, Tuple

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


def freeze_imports() -> None:
    """Moves every object alive now to the garbage collector's permanent generation.
    TensorFlow's modules alone are about 300k objects that every full collection of a run
    would scan again and that the interpreter's exit collects, for nothing: they live as
    long as the process (docs/benchmarks.md#the-test-suite). What the run creates later is
    collected as usual."""
    gc.freeze()


def _copy_lines(read_end: int, terminal: int) -> None:
    """Copies the lines of the pipe `read_end` to `terminal`, `NOISE` left out, until the
    pipe's last write end closes."""
    with os.fdopen(read_end, 'rb') as lines:
        for line in lines:
            if not NOISE.search(line.decode('utf-8', 'replace')):
                os.write(terminal, line)


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
    threading.Thread(target=_copy_lines, args=(read_end, terminal), name='native_output',
                     daemon=True).start()


@contextlib.contextmanager
def native_noise_filtered() -> Iterator[None]:
    """`NOISE` filtered from descriptor 2 while the block runs, then descriptor 2 as it was.

    For the Python API (`reverb_agents.train`, `load_policy`): TensorFlow's
    start-up lines come while it is imported, and a library must not keep a
    caller's descriptor 2 behind a pipe. `sys.stderr` is untouched (it writes
    to descriptor 2, through the filter, until the block ends).
    """
    if _installed:  # the whole process is filtered already
        yield
        return
    try:
        saved = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:
        yield
        return
    copier = threading.Thread(target=_copy_lines, args=(read_end, saved),
                              name='native_output_import', daemon=True)
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    copier.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # drops the pipe's last write end: the copier reads to the end
        copier.join(timeout=5.0)
        if not copier.is_alive():  # else a child process still holds the pipe
            os.close(saved)


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


def terminal_size(stream: TextIO) -> Tuple[int, int]:
    """(columns, rows) of the terminal `stream` writes to; (0, 0) for a stream with no
    terminal, and what a terminal reports, 0 x 0 on some (serial consoles, containers)."""
    try:
        return tuple(os.get_terminal_size(stream.fileno()))
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return 0, 0


class ProgressDisplay:
    """The run's progress: a tqdm bar on a terminal, plain lines every `interval_s` elsewhere.

    `close(env_steps)` shows the run's final count before the display ends, so
    a run that spent its budget ends at 100% whenever the last `update` came.
    """

    def __init__(self, total_env_steps: int, start_env_steps: int = 0, interval_s: float = 5.0,
                 use_bar: Optional[bool] = None):
        global _bar
        self.total, self.interval_s = total_env_steps, interval_s
        self._last_line = time.monotonic()
        self._shown_env_steps: Optional[int] = None  # the count of the last plain line
        self._rates = (0.0, 0, 0.0, float('nan'), 0)  # the last `update`'s other numbers
        columns, rows = terminal_size(sys.stderr)
        if use_bar is None:  # tqdm draws nothing on a terminal of 0 columns
            use_bar = sys.stderr.isatty() and columns > 0
        self._bar = None
        if use_bar:
            from tqdm import tqdm
            self._bar = tqdm(total=total_env_steps, initial=start_env_steps, unit=' env steps',
                             unit_scale=True, ncols=columns or 80, nrows=rows or 24,
                             file=sys.stderr,
                             mininterval=0.5, smoothing=0.1,
                             bar_format='{percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} '
                                        'env steps [{elapsed}<{remaining}{postfix}]')
            _bar = self._bar

    def update(self, env_steps: int, env_steps_per_s: float, learner_steps: int,
               learner_steps_per_s: float, recent_return: float, episodes: int) -> None:
        """The numbers now: totals (earlier runs of the logdir included) and this run's rates."""
        self._rates = (env_steps_per_s, learner_steps, learner_steps_per_s, recent_return,
                       episodes)
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
        self._line(env_steps, env_steps_per_s, learner_steps, learner_steps_per_s, returns,
                   episodes)

    def _line(self, env_steps: int, env_steps_per_s: float, learner_steps: int,
              learner_steps_per_s: float, returns: str, episodes: int) -> None:
        self._shown_env_steps = env_steps
        left = max(0, self.total - env_steps)
        eta = f'{left / env_steps_per_s:.0f} s' if env_steps_per_s > 0 else '?'
        # Plain integers: scripts and tests read these lines.
        status(f'env steps {env_steps} of {self.total} '
               f'({100 * min(env_steps, self.total) / self.total:.0f}%, '
               f'{env_steps_per_s:.0f}/s, ETA {eta})  learner steps {learner_steps} '
               f'({learner_steps_per_s:.1f}/s)  return (last 20) {returns}  episodes {episodes}')

    def close(self, env_steps: Optional[int] = None) -> None:
        """Ends the display; with `env_steps` (the run's final total) it shows that count
        first: the bar moves to it, and off a terminal a last line gives it unless the last
        line did."""
        global _bar
        if env_steps is not None:
            if self._bar is not None:
                self._bar.update(max(0, min(env_steps, self.total) - self._bar.n))
            elif env_steps != self._shown_env_steps:
                rate, learner_steps, learner_rate, recent, episodes = self._rates
                self._line(env_steps, rate, learner_steps, learner_rate,
                           f'{recent:.1f}' if episodes else '-', episodes)
        if self._bar is not None:
            self._bar.close()
            if _bar is self._bar:
                _bar = None
            self._bar = None


def table(rows: Sequence[Sequence[str]]) -> str:
    """Two columns, the first padded: the run's final table."""
    width = max(len(key) for key, _ in rows)
    return '\n'.join(f'  {key:<{width}}  {value}' for key, value in rows)
