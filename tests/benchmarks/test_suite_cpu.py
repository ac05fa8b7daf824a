"""benchmarks/suite_cpu.py: a pytest run with the plugin, on two workers, writes each
test's own CPU and its subprocesses' CPU, summed per file, and the machine's busy
cores over the session."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TESTS = '''
import subprocess, sys

def test_burns_in_a_subprocess():
    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(10 ** 7))'],
                   check=True)

def test_burns_here():
    sum(i * i for i in range(10 ** 7))

def test_idle():
    pass
'''


def test_each_test_gets_its_own_and_its_subprocesses_cpu(tmp_path):
    (tmp_path / 'test_burn.py').write_text(TESTS)
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')  # not the repository's options
    out = tmp_path / 'cpu.json'
    # From the checkout, so that `-p benchmarks.suite_cpu` imports (python -m puts the
    # working directory first on the path).
    result = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'benchmarks.suite_cpu', '-p',
         'no:cacheprovider', '-n', '2', f'--suite-cpu-out={out}', '-c',
         str(tmp_path / 'pytest.ini'), '--rootdir', str(tmp_path), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    summary = json.loads(out.read_text())
    tests = {row['test'].split('::')[1]: row for row in summary['by_test']}
    assert summary['tests'] == 3 and set(tests) == {
        'test_burns_in_a_subprocess', 'test_burns_here', 'test_idle'}
    assert tests['test_burns_in_a_subprocess']['subprocess_cpu_s'] > 0.1
    assert tests['test_burns_here']['own_cpu_s'] > 0.1
    assert tests['test_burns_here']['subprocess_cpu_s'] < 0.05
    assert tests['test_idle']['own_cpu_s'] < tests['test_burns_here']['own_cpu_s']
    (name, total), = summary['cpu_s_by_file'].items()
    assert name.endswith('test_burn.py') and total >= 0.2
    assert not os.path.exists(f'{out}.parts')
    # The machine's cores over the session: at least what the tests counted, less the
    # rounding of its ticks, and no more than its cores could give.
    machine = summary['machine']
    counted = summary['own_cpu_s'] + summary['subprocess_cpu_s']
    assert machine['busy_cpu_s'] >= counted - 0.1, summary
    # (cores_busy is the ratio of the unrounded figures: the JSON's wall and busy seconds
    # are rounded to 0.1 s, which a session of a second moves by 10%.)
    assert machine['cores_busy'] <= os.cpu_count() + 0.1, summary
    assert 0 < machine['counted_share'] <= 1.1 and machine['cores_busy'] > 0, summary
