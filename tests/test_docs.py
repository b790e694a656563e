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

from build_words import COMMIT_HASH, DOC_PATTERNS, PROJECT_ISSUE, find

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = re.compile(r"^<!-- runnable -->[ \t]*\n```python[ \t]*\n(.*?)^```", re.S | re.M)


def runnable_blocks():
    for path in DOCS:
        for m in RUNNABLE.finditer(path.read_text()):
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


USER_DOCS = [*DOCS, ROOT / "cases.md", ROOT / "CHANGELOG.md"]


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_words_about_how_the_project_was_built(path):
    """User docs (README, docs/, cases.md, CHANGELOG.md) state current facts
    with their date; history is in CHANGELOG.md by date."""
    hits = find(path.read_text(), DOC_PATTERNS)
    assert not hits, "\n".join(f"{path.relative_to(ROOT)}:{line} says {words!r}" for line, words in hits)


def test_build_word_patterns():
    assert PROJECT_ISSUE.search("## targets (issue 20)") and not PROJECT_ISSUE.search("fla issue 640")
    assert not PROJECT_ISSUE.search("flash-linear-attention issue 640") and not PROJECT_ISSUE.search("its issue 640")
    assert COMMIT_HASH.search("main at 7c8f39f") and not COMMIT_HASH.search("requires 4259840 bits")
    assert not COMMIT_HASH.search("deadbeefs") and not COMMIT_HASH.search("2026-11-29")


#: The documents whose relative links and #anchors must resolve.
LINKED_DOCS = [ROOT / "README.md", ROOT / "cases.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[ \t]*$", re.S | re.M)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans (no links there)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text (link targets, HTML tags, code marks and ``*``
    dropped), lower case, every character but letters, digits, spaces, ``-`` and ``_`` removed,
    spaces made ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every #anchor of a Markdown file: its headings' slugs (a repeated one gets ``-1``, ``-2``,
    ... as on GitHub) and its ``<a name|id="...">`` tags."""
    text = FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    out = set(HTML_ID.findall(text))
    for _, title in HEADING.findall(text):
        slug = github_slug(title)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_github_slug():
    assert github_slug("Install into your own environment") == "install-into-your-own-environment"
    assert github_slug("`fla-ascend check`: the NPU check") == "fla-ascend-check-the-npu-check"
    assert github_slug("On Ascend: the compiled plan and an estimate (2026-12-01)") == \
        "on-ascend-the-compiled-plan-and-an-estimate-2026-12-01"
    assert github_slug("The [UB](x.md) model, *measured*") == "the-ub-model-measured"
    assert github_slug("chunk_fwd_h and `__init__`") == "chunk_fwd_h-and-__init__"


@pytest.mark.parametrize("path", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(path):
    """Every relative link of README.md, cases.md and docs/*.md names a file that exists, and its
    #anchor a heading of the target (GitHub's slug); links to other sites are not followed."""
    text = _prose(path.read_text())
    dead = []
    for target in LINK.findall(text) + REF_DEF.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        line = path.read_text().count("\n", 0, path.read_text().find(target)) + 1
        if not dest.exists():
            dead.append(f"line {line}: {target}: {dest} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            dead.append(f"line {line}: {target}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
        elif anchor and dest.suffix != ".md":
            dead.append(f"line {line}: {target}: an anchor into a file that is not Markdown")
    assert not dead, f"{path.relative_to(ROOT)}:\n" + "\n".join(dead)


def test_link_check_finds_dead_links(tmp_path):
    """The check above is not vacuous: it sees links, a missing file and a wrong anchor."""
    (tmp_path / "a.md").write_text("# Top\n\n## Two words\n\n## Two words\n\n"
                                   "[ok](b.md#the-target) [ok](#two-words-1) ![img](b.md) `[not](x.md)`\n"
                                   "```\n[not a link](nowhere.md)\n```\n[bad](nope.md) [bad](b.md#other)\n")
    (tmp_path / "b.md").write_text("## The target\n")
    text = _prose((tmp_path / "a.md").read_text())
    assert LINK.findall(text) == ["b.md#the-target", "#two-words-1", "b.md", "nope.md", "b.md#other"]
    assert anchors(tmp_path / "a.md") == {"top", "two-words", "two-words-1"}
    assert "the-target" in anchors(tmp_path / "b.md") and "other" not in anchors(tmp_path / "b.md")
