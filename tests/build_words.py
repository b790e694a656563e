"""Words about how the project was built, never facts for a reader: one list for the user docs
(tests/test_docs.py) and for the comments, docstrings and strings of the Python files
(tests/test_code_words.py). History is in CHANGELOG.md by date; everything else states the
current fact and, for a number, its public source or the docs/ page that holds it."""
import re

#: Process words, matched in lower-cased text. "helper" alone is not one (a helper function is
#: a fact), nor "stand-in" alone (a test double is one); "the lead" and "lead's" are.
BUILD_WORDS = re.compile(
    r"\bsession|device tool|placeholder|\bsubagent|\bhelper (?:session|agent)|\b(?:the )?lead's\b|\bthe lead\b"
    r"|stand-in machine|\bcampaign|fresh-user trial")

#: Words that are process words in the docs only: in code "this machine" is the one running it.
DOC_WORDS = re.compile(r"this machine")

#: A project issue number ("issue 20", "issue #7", "issues 3"); an upstream project's issue
#: ("flash-linear-attention issue 640", "fla issue 640", "triton-ascend issue 2261", "its issue 640")
#: is a fact and allowed.
PROJECT_ISSUE = re.compile(r"(?<!fla )(?<!its )(?<!flash-linear-attention )(?<!triton-ascend )\bissues? #?\d+")

#: A commit hash (7 to 40 hex digits, letters and digits mixed): results name their date instead.
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")

#: In code, only a hash named as a commit ("commit 7c8f39f", "main at 7c8f39f"): a hex
#: constant or a digest in a string is not one.
COMMIT_REF = re.compile(r"\b(?:commits?|revision|rev|sha|(?:main|head|branch) at)[\s:=#@]+"
                        r"(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")

#: Paths outside the repository, on the machines the project was built on.
OUTSIDE_PATH = re.compile(r"\.\./shared\b|(?<![\w.])/work/")

DOC_PATTERNS = (BUILD_WORDS, DOC_WORDS, PROJECT_ISSUE, COMMIT_HASH, OUTSIDE_PATH)
CODE_PATTERNS = (BUILD_WORDS, PROJECT_ISSUE, COMMIT_REF, OUTSIDE_PATH)


def find(text: str, patterns) -> list[tuple[int, str]]:
    """``(line, words)`` of every match of ``patterns`` in ``text`` (lower-cased), line 1-based."""
    low = text.lower()
    flat = low.replace("\n", " ")  # same length: words split over two lines still match
    return sorted((low.count("\n", 0, m.start()) + 1, m.group(0)) for rx in patterns for m in rx.finditer(flat))
