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


def test_no_words_about_how_the_project_was_built():
    """User docs state current facts; history is in CHANGELOG.md by date."""
    for path in [*DOCS, ROOT / "cases.md", ROOT / "CHANGELOG.md"]:
        text = path.read_text().lower()
        for word in ("session", "device tool", "this machine"):
            assert word not in text, f"{path.name} says {word!r}"
