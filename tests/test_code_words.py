"""The comments, docstrings and strings of every tracked Python file under fla_ascend/, tests/,
benchmarks/ and scripts/ state facts, not how the project was built: the word list of
tests/build_words.py (shared with the docs test), project issue numbers, commit hashes named as
commits, and paths outside the repository."""
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from build_words import BUILD_WORDS, CODE_PATTERNS, COMMIT_REF, OUTSIDE_PATH, PROJECT_ISSUE, find

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("fla_ascend", "tests", "benchmarks", "scripts")

#: Files allowed some patterns, and why. The real-profile tests read their corpus from the folder
#: beside the repository (they skip where it is absent) and say where they look; the word list and
#: the two tests that use it quote the words as examples.
ALLOWED = {"tests/profiling/test_real_profiles.py": (OUTSIDE_PATH,), "tests/build_words.py": CODE_PATTERNS,
           "tests/test_code_words.py": CODE_PATTERNS, "tests/test_docs.py": CODE_PATTERNS}

CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)


def python_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *(f"{d}/*.py" for d in FOLDERS)], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        return [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist)
        return sorted(p for d in FOLDERS for p in (ROOT / d).rglob("*.py"))


def prose(source: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of each comment and string literal of ``source``. A string that is a
    bare identifier (``__all__`` entries) is a name, not prose."""
    kinds = {tokenize.COMMENT, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in kinds and not re.fullmatch(r"[rbuf]*(['\"])[A-Za-z_]\w*\1", tok.string, re.I):
            out.append((tok.start[0], tok.string))
    return out


def hits(source: str, allowed=()) -> list[tuple[int, str]]:
    """Every process word, issue number, commit and outside path in ``source``'s prose. Build
    words inside ``code spans`` are names (``Session``), not words; the other patterns count there."""
    found = []
    for line, text in prose(source):
        patterns = [p for p in CODE_PATTERNS if all(p is not a for a in allowed)]
        found += [(line + n - 1, w) for n, w in find(text, [p for p in patterns if p is not BUILD_WORDS])]
        if BUILD_WORDS in patterns:
            found += [(line + n - 1, w) for n, w in find(CODE_SPAN.sub("", text), [BUILD_WORDS])]
    return sorted(found)


FILES = python_files()


def test_the_files_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"fla_ascend/__init__.py", "tests/test_code_words.py", "tests/build_words.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_words_about_how_the_project_was_built(path):
    rel = path.relative_to(ROOT).as_posix()
    found = hits(path.read_text(), ALLOWED.get(rel, ()))
    assert not found, "\n".join(f"{rel}:{line} says {words!r}" for line, words in found)


def test_the_check_finds_planted_words():
    """Not vacuous: each kind of hit is found in a comment, a docstring or a string; code, names
    and upstream issues are not hits."""
    src = ('"""Tuned in the ninth session (issue 7)."""\n'
           "x = 1  # as the lead's tests do, commit 7c8f39f\n"
           "y = f'see ../shared/anchors.md and /work/main'\n"
           "__all__ = ['Session']\n"
           "def f(start_new_session=True):  # ``Session.step()``; fla issue 640; 0xdeadbee1\n"
           "    '''a jit dot helper; a stand-in suite; sha 4259840 bits'''\n")
    assert hits(src) == [(1, "issue 7"), (1, "session"), (2, "commit 7c8f39f"), (2, "the lead's"),
                         (3, "../shared"), (3, "/work/")]
    assert hits(src, (OUTSIDE_PATH,)) == [(1, "issue 7"), (1, "session"), (2, "commit 7c8f39f"), (2, "the lead's")]
    assert PROJECT_ISSUE.search("issue #12") and COMMIT_REF.search("main at 7c8f39f")
    assert not COMMIT_REF.search("requires 4259840 bits") and not COMMIT_REF.search("commit deadbeefs")
