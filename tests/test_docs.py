"""The documentation holds together: the README stays a front page, every preset the
README and docs/ name exists, every link between pages and every `docs/<page>.md#<anchor>`
reference (from presets, code and pages) lands on a heading, nothing points outside the
repository, and the mkdocs site builds in strict mode."""

import os
import re
import shutil
import subprocess
import sys
import unicodedata
from typing import Dict, Iterator, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
DOCS = os.path.join(ROOT, 'docs')
PRESETS = os.path.join(ROOT, 'launch', 'presets')
MAX_README_LINES = 300
# Where code and presets live (their comments and docstrings link to docs sections).
SOURCE_FOLDERS = ('agents', 'networks', 'replay', 'launch', 'benchmarks', 'tests')
# Never part of the repository's own files when git cannot list them.
NOT_OURS = {'.git', '.venv', '.ci-venv', '.ci-wheel-venv', 'build', 'dist', 'runs', 'logs',
            '__pycache__', '.pytest_cache'}

FLAGFILE = re.compile(r'--flagfile=launch/presets/([\w-]+)\.flags')
PRESET_FLAG = re.compile(r'--preset=([\w-]+)')
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
DOC_SECTION = re.compile(r'docs/([\w-]+\.md)#([\w-]+)')
FENCE = re.compile(r'^(```|~~~).*?^\1', re.S | re.M)


def read(path: str) -> str:
    with open(path, encoding='utf-8') as f:
        return f.read()


def pages() -> List[str]:
    """README.md and every page under docs/."""
    return [README] + sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS)
                             if name.endswith('.md'))


def presets() -> Set[str]:
    return {name[:-len('.flags')] for name in os.listdir(PRESETS) if name.endswith('.flags')}


def prose(text: str) -> str:
    """Markdown without its fenced code blocks (their brackets are not links)."""
    return FENCE.sub('', text)


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it; the same as
    GitHub's for headings of words, spaces, hyphens and colons."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link's text
    text = re.sub(r'[`*]', '', text)
    text = unicodedata.normalize('NFKD', text).encode('ascii', 'ignore').decode('ascii')
    text = re.sub(r'[^\w\s-]', '', text).strip().lower()
    return re.sub(r'[-\s]+', '-', text)


_ANCHORS: Dict[str, Set[str]] = {}


def anchors(path: str) -> Set[str]:
    """The anchors of a markdown file's headings."""
    if path not in _ANCHORS:
        _ANCHORS[path] = {slug(line.lstrip('#')) for line in prose(read(path)).splitlines()
                          if re.match(r'#{1,6} ', line)}
    return _ANCHORS[path]


def test_the_readme_is_a_front_page():
    with open(README, encoding='utf-8') as f:
        lines = sum(1 for _ in f)
    assert lines <= MAX_README_LINES, (
        f'README.md has {lines} lines (at most {MAX_README_LINES}): move the detail to docs/')


def test_every_preset_the_readme_and_docs_name_exists():
    known = presets()
    missing = []
    for path in pages():
        text = read(path)
        named = FLAGFILE.findall(text) + [n for n in PRESET_FLAG.findall(text) if n != 'none']
        missing += [f'{os.path.relpath(path, ROOT)}: {name}' for name in named
                    if name not in known]
    assert not missing, missing


def results_rows() -> List[List[str]]:
    """The README's results table, one list of cells per row, the header first."""
    text = read(README)
    section = text[text.index('\n## Results'):]
    section = section[:section.find('\n## ', 1)] if '\n## ' in section[1:] else section
    rows = [line for line in section.splitlines() if line.startswith('|')]
    return [[cell.strip() for cell in row.strip('|').split(' | ')] for row in rows
            if not set(row) <= set('|- ')]


def test_every_result_in_the_readme_names_a_preset():
    header, *rows = results_rows()
    column = next(i for i, cell in enumerate(header) if 'preset' in cell)
    assert 10 <= len(rows) <= 15, f'the results table has {len(rows)} rows (a short table: 10 to 15)'
    known = presets()
    wrong = []
    for row in rows:
        code = re.search(r'`([^`]+)`', row[column])
        word = code.group(1).split()[0] if code else ''
        if word.startswith('--preset='):
            word = word[len('--preset='):]
        if word not in known | {'none'}:
            wrong.append(' | '.join(row[:column + 1]))
    assert not wrong, f'results whose preset cell names no preset: {wrong}'


def test_links_between_pages_resolve():
    broken = []
    for path in pages():
        for target in LINK.findall(prose(read(path))):
            if re.match(r'[a-z]+:', target):  # https:, mailto:
                continue
            file, _, anchor = target.partition('#')
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file \
                else path
            where = f'{os.path.relpath(path, ROOT)}: {target}'
            if not os.path.exists(resolved):
                broken.append(f'{where} (no such file)')
            elif anchor and resolved.endswith('.md') and anchor not in anchors(resolved):
                broken.append(f'{where} (no such heading)')
    assert not broken, broken


def source_files() -> Iterator[str]:
    """The presets, the Python sources and the pages: where `docs/<page>.md#<anchor>` appears."""
    yield from pages()
    for folder in SOURCE_FOLDERS:
        for directory, subdirs, files in os.walk(os.path.join(ROOT, folder)):
            subdirs[:] = [d for d in subdirs if d not in NOT_OURS]
            yield from (os.path.join(directory, f) for f in files
                        if f.endswith(('.py', '.flags')))


def test_references_to_docs_sections_resolve():
    broken = []
    for path in source_files():
        for page, anchor in DOC_SECTION.findall(read(path)):
            target = os.path.join(DOCS, page)
            if not os.path.exists(target) or anchor not in anchors(target):
                broken.append(f'{os.path.relpath(path, ROOT)}: docs/{page}#{anchor}')
    assert not broken, broken
    assert DOC_SECTION.search(read(os.path.join(PRESETS, 'clear_cartpole.flags'))), \
        'the presets link to their measurements'


def repository_files() -> List[str]:
    """Tracked and untracked-but-not-ignored files (git), else a walk without the
    virtual environments and build outputs."""
    if shutil.which('git') and os.path.isdir(os.path.join(ROOT, '.git')):
        listed = subprocess.run(
            ['git', 'ls-files', '--cached', '--others', '--exclude-standard', '-z'],
            cwd=ROOT, capture_output=True, check=True).stdout.decode()
        return [os.path.join(ROOT, name) for name in listed.split('\0') if name]
    found = []
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in NOT_OURS and not d.endswith('.egg-info')]
        found += [os.path.join(directory, f) for f in files]
    return found


def test_nothing_points_outside_the_repository():
    outside = ('..' + '/shared').encode()  # spelled in two parts so this file does not match
    offenders = []
    for path in repository_files():
        if os.path.isfile(path):
            with open(path, 'rb') as f:
                if outside in f.read():
                    offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, offenders


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip('mkdocs', reason="mkdocs is not installed (pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--site-dir', str(tmp_path / 'site')],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert (tmp_path / 'site' / 'benchmarks' / 'index.html').is_file()
