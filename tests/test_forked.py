"""The tests' fork server (`tests/forked.py`): a child gets its own argv, environment,
working directory, streams and exit status, ends as an interpreter ends, and a timeout
kills it with whatever it started; children run side by side, a background one's
output streamed."""

import os
import resource
import signal
import subprocess
import time

import pytest

from tests import forked

CHILD = '''
import atexit, os, sys, threading, time
print('argv', sys.argv[1:], 'cwd', os.getcwd(), 'env', os.environ.get('FORKED_TEST'))
print('to stderr', file=sys.stderr)
atexit.register(lambda: print('atexit ran'))
threading.Thread(target=lambda: (time.sleep(0.2), print('thread joined'))).start()
sys.exit(int(sys.argv[1]))
'''


@pytest.fixture(scope='module')
def server():
    server = forked.ForkServer(['json'], dict(os.environ))
    yield server
    server.close()


def test_a_child_runs_with_its_request_and_ends_as_an_interpreter_ends(server, tmp_path):
    env = dict(os.environ, FORKED_TEST='yes')
    before = forked.children_cpu_s()
    code, out, err = server.run(['3', 'b'], env, str(tmp_path), timeout=60, code=CHILD)
    assert code == 3
    assert out.splitlines() == [f"argv ['3', 'b'] cwd {tmp_path} env yes", 'thread joined',
                                'atexit ran']
    assert err == 'to stderr\n'
    assert forked.children_cpu_s() > before
    script = tmp_path / 'script.py'
    script.write_text(CHILD)
    code, out, _ = server.run([str(script), '0'], dict(os.environ), '/', timeout=60,
                              script=str(script))
    assert code == 0 and out.startswith("argv ['0'] cwd / env None")


def test_a_timeout_kills_the_child_and_what_it_started(server, tmp_path):
    pid_file = tmp_path / 'grandchild'
    code = ('import subprocess, sys, time\n'
            'p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])\n'
            f'open({str(pid_file)!r}, "w").write(str(p.pid))\n'
            'time.sleep(600)\n')
    with pytest.raises(subprocess.TimeoutExpired):
        server.run([], dict(os.environ), str(tmp_path), timeout=5, code=code)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild)
    code, out, _ = server.run([], dict(os.environ), str(tmp_path), timeout=60,
                              code='print("still serving")')
    assert (code, out) == (0, 'still serving\n')


def _alive(pid: int) -> bool:
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().split(') ')[1][0] != 'Z'  # a zombie is dead, not yet reaped
    except FileNotFoundError:
        return False


@pytest.mark.parametrize('extra_env,fresh', [
    (None, False), ({'REVERB_AGENTS_X': '1'}, False), ({'TF_CPP_MIN_LOG_LEVEL': '3'}, True),
    ({'PYTHONHASHSEED': '1'}, True), ({'PYTHONPATH': '/x'}, False),
    ({'CUDA_VISIBLE_DEVICES': ''}, True)])
def test_variables_read_at_start_up_need_a_fresh_interpreter(extra_env, fresh):
    assert forked.needs_fresh_interpreter(extra_env) == fresh


def test_a_childs_pythonpath_comes_after_its_scripts_directory(server, tmp_path):
    """A fresh interpreter's order: the script's directory, then PYTHONPATH's entries,
    then the server's own path; the child imports a module only PYTHONPATH holds."""
    (tmp_path / 'lib_a').mkdir()
    (tmp_path / 'lib_a' / 'only_here.py').write_text('WHERE = "lib_a"\n')
    script = tmp_path / 'script.py'
    script.write_text('import sys, only_here\nprint(only_here.WHERE)\n'
                      'print(sys.path[:2])\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / 'lib_a'),
                                                      os.environ.get('PYTHONPATH', '')]))
    code, out, err = server.run([str(script)], env, '/', timeout=60, script=str(script))
    assert code == 0, err
    assert out.splitlines() == ['lib_a', repr([str(tmp_path), str(tmp_path / 'lib_a')])]


def test_a_childs_cpu_counts_once_before_and_after_its_server_is_reaped(tmp_path):
    """`children_cpu_s` holds the children's CPU while their server lives; reaped, the
    server's `RUSAGE_CHILDREN` share holds it instead (benchmarks/suite_cpu.py adds both)."""
    server = forked.ForkServer(['json'], dict(os.environ))
    before = forked.children_cpu_s() + _reaped_cpu_s()
    code, _, _ = server.run([], dict(os.environ), str(tmp_path), timeout=60,
                            code='import time\nt = time.process_time()\n'
                                 'while time.process_time() - t < 0.5: pass\n')
    assert code == 0
    reported = forked.children_cpu_s() + _reaped_cpu_s() - before
    server.close()
    counted = forked.children_cpu_s() + _reaped_cpu_s() - before
    assert 0.5 <= reported <= counted < reported + 5  # + the server's own start-up


def _reaped_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_children_run_side_by_side_and_stream_their_merged_output(server, tmp_path):
    """A child in the background (`start`, merged output read as it is written) while
    another runs to its end; signals reach the background child, its status comes back."""
    waiting = server.start([], dict(os.environ), str(tmp_path), merged=True, code=(
        'import signal, sys, time\n'
        'signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n'
        'print("out", flush=True)\n'
        'print("err", file=sys.stderr, flush=True)\n'
        'time.sleep(600)\n'))
    lines = iter(waiting.stdout)
    assert [next(lines), next(lines)] == ['out\n', 'err\n']
    assert waiting.poll() is None
    code, out, _ = server.run([], dict(os.environ), str(tmp_path), timeout=60,
                              code='print("beside it")')
    assert (code, out) == (0, 'beside it\n')
    waiting.send_signal(signal.SIGTERM)
    assert waiting.wait(60) == 7 and waiting.poll() == 7
    assert list(lines) == []  # the stream ends with the child


def test_output_reads_lines_as_they_come_and_waits_for_the_end(server, tmp_path):
    """`Output`: a match from a given line on, every line read once the child has ended
    (the last one written just before it ends), and a wait that fails once the output
    ended without its line."""
    child = server.start([], dict(os.environ), str(tmp_path), merged=True, code=(
        'import time\n'
        'print("step 1", flush=True)\n'
        'time.sleep(0.3)\n'
        'print("step 2", flush=True)\n'
        'print("last", end="")\n'))
    seen = []
    output = forked.Output(child.stdout, on_line=seen.append)
    assert output.wait_for(r'step (\d)', timeout_s=60)[0] == 0
    i, match = output.wait_for(r'step (\d)', timeout_s=60, start=1)
    assert (i, match.group(1)) == (1, '2')
    assert child.wait(60) == 0
    output.wait_end()
    assert output.lines == seen == ['step 1', 'step 2', 'last']
    assert output.text() == 'step 1\nstep 2\nlast' and output.text(last=1) == 'last'
    with pytest.raises(AssertionError, match="no line matching 'step 3'"):
        output.wait_for('step 3', timeout_s=60)
