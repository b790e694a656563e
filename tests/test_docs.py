"""The user documentation runs as written: every ```python block of README.md and docs/*.md
marked with an ``<!-- runnable -->`` line right before it is executed on this machine (the CPU
interpreter in CI), each in a fresh interpreter; and the documentation states facts, not how the
project was built."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->[ \t]*\n```python[ \t]*\n(.*?)^```", re.S | re.M)


def runnable_blocks():
    for path in DOCS:
        for i, m in enumerate(RUNNABLE.finditer(path.read_text())):
            line = path.read_text()[: m.start()].count("\n") + 1
            yield pytest.param(path, m.group(1), id=f"{path.relative_to(ROOT)}:{line}")


def test_the_readme_has_a_runnable_example():
    assert any(p == ROOT / "README.md" for p, _ in (b.values for b in runnable_blocks()))


@pytest.mark.parametrize("path,code", list(runnable_blocks()))
def test_runnable_block(path, code, tmp_path):
    script = tmp_path / "block.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"{path.name} block failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"


#: Words about how the project was built, never facts for a user. A project issue number ("issue
#: 20") is one; an upstream project's issue ("flash-linear-attention issue 640", "fla issue 640",
#: "its issue 640") is a fact and allowed. A commit hash (7 to 40 hex digits, letters and digits
#: mixed) is one too: results name their date instead.
BUILD_WORDS = ("session", "device tool", "this machine", "placeholder")
PROJECT_ISSUE = re.compile(r"(?<!fla )(?<!its )(?<!flash-linear-attention )\bissue \d+")
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
USER_DOCS = [*DOCS, ROOT / "cases.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "benchmarks" / "results").rglob("*.md"))]


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_words_about_how_the_project_was_built(path):
    """User docs (README, docs/, cases.md, CHANGELOG.md, benchmarks/results/) state current facts
    with their date; history is in CHANGELOG.md by date."""
    text = path.read_text().lower()
    for word in BUILD_WORDS:
        assert word not in text, f"{path.relative_to(ROOT)} says {word!r}"
    for rx in (PROJECT_ISSUE, COMMIT_HASH):
        m = rx.search(text)
        assert m is None, f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1} says {m.group(0)!r}"


def test_build_word_patterns():
    assert PROJECT_ISSUE.search("## targets (issue 20)") and not PROJECT_ISSUE.search("fla issue 640")
    assert not PROJECT_ISSUE.search("flash-linear-attention issue 640") and not PROJECT_ISSUE.search("its issue 640")
    assert COMMIT_HASH.search("main at 7c8f39f") and not COMMIT_HASH.search("requires 4259840 bits")
    assert not COMMIT_HASH.search("deadbeefs") and not COMMIT_HASH.search("2026-11-29")
