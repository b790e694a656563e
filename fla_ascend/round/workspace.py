"""The optimisation-round workspace: baseline, rounds, gates and the ledger.

Layout of a workspace directory::

    workspace.json          op, source files, benchmark settings, rounds, best, open round
    baseline/src/...        snapshot of the op's source files
    baseline/bench.json     canonical benchmark artifact (passed its correctness gate)
    baseline/state.json
    round-N/src/...         the candidate: starts as the parent's snapshot; edit it here
                            (or copy edits from the checkout with ``sync``)
    round-N/round-state.json
    round-N/attempts.md     chronological log the tool appends to
    round-N/probes/probe-K.json   screening runs (never the round's result)
    round-N/bench.json      canonical artifact (only when the correctness gate passed)
    round-N/correctness.json      the suite output when the gate failed (evidence)
    round-N/compare.json, compare.md   vs baseline and vs parent
    round-N/summary.md      written by submit
    round-N/ir/             optional IR capture (``fla-ascend ir capture``)
    opt-note.md             ledger: one entry per submitted round + "## Overall Summary"
    learned_lessons.md      appended only through :meth:`Workspace.lesson`

Rules enforced: one open round at a time; a round starts from the last accepted
round (or the baseline); speedups come only from :meth:`Workspace.compare`; a round whose
correctness gate failed can only be submitted as rejected; an accepted round needs a changed
snapshot, a passed gate, a canonical artifact of the current snapshot and a comparison of that
artifact; lessons need an evidence file inside the workspace.
"""
from __future__ import annotations

import datetime as _dt
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from fla_ascend.round import sources as _src
from fla_ascend.round.compare import (
    compare_artifacts,
    comparison_markdown,
    fmt_pct,
    fmt_speedup,
)
from fla_ascend.round.runner import DEFAULT_SUITE, SuiteRequest, run_suite_isolated

WORKSPACE_SCHEMA = "fla-ascend-round-workspace/1"
ROUND_SCHEMA = "fla-ascend-round/1"
ANALYSIS_LEVELS = ("pattern", "profile", "ir")
TARGETS = {"operator": "total-op", "kernel": "kernel"}
PROBE_LABEL = "SCREENING ONLY: quick settings, few shapes; not a round result, no speedup may be claimed from it"
OVERALL = "## Overall Summary"


class RoundError(RuntimeError):
    """The workflow refuses an action; the message says why and what is missing."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _read(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def _write(path: Path, data: dict) -> None:
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def _append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def correctness_of(artifact: dict, provider: str = "fla_ascend") -> dict:
    """Correctness gate result of an artifact for one provider.

    Returns:
        ``{"status": "passed"|"failed", "n_cases", "failing": [{key, rel_rmse, tolerance,
        error}], "worst": {key, rel_rmse (max over outputs), tolerance}}``.

    Raises:
        RoundError: the artifact has no result for ``provider`` (nothing was checked).
    """
    rows = [r for r in artifact.get("results", []) if r.get("provider") == provider]
    if not rows:
        raise RoundError(f"the benchmark artifact holds no result for provider {provider!r}: nothing was checked")
    failing, worst = [], None
    for r in rows:
        key = f"{r['op']}/{r['shape']}/{r['mode']}"
        vals = [float(v) for v in (r.get("rel_rmse") or {}).values() if v is not None]
        err = max(vals) if vals else None
        if err is not None and (worst is None or err > worst["rel_rmse"]):
            worst = {"key": key, "rel_rmse": err, "tolerance": r.get("tolerance")}
        if not r.get("correct") or r.get("error"):
            failing.append({"key": key, "rel_rmse": r.get("rel_rmse"), "tolerance": r.get("tolerance"),
                            "error": r.get("error")})
    return {"status": "failed" if failing else "passed", "n_cases": len(rows), "failing": failing, "worst": worst}


def _fmt_failing(failing: list[dict], limit: int = 5) -> str:
    parts = []
    for f in failing[:limit]:
        parts.append(f"{f['key']} (rel_rmse {f['rel_rmse']}, tolerance {f['tolerance']}"
                     + (f", error {f['error']}" if f.get("error") else "") + ")")
    more = f" and {len(failing) - limit} more" if len(failing) > limit else ""
    return "; ".join(parts) + more


@dataclass
class RoundInfo:
    """A round directory and its parsed ``round-state.json``."""

    n: int
    path: Path
    state: dict


class Workspace:
    """An operator optimisation workspace (layout and rules in the module docstring).

    Create one with :meth:`init`, open an existing one with ``Workspace(path)``.
    """

    def __init__(self, path: str | Path):
        """Open an existing workspace.

        Raises:
            RoundError: ``path`` holds no ``workspace.json`` of this schema.
        """
        self.path = Path(path).resolve()
        cfg = self.path / "workspace.json"
        if not cfg.is_file():
            raise RoundError(f"{self.path} is not a round workspace (no workspace.json); "
                             "run `fla-ascend round init` first")
        self.config = _read(cfg)
        if self.config.get("schema") != WORKSPACE_SCHEMA:
            raise RoundError(f"{cfg}: schema must be {WORKSPACE_SCHEMA!r}, got {self.config.get('schema')!r}")

    # ------------------------------------------------------------------ creation
    @classmethod
    def init(
        cls,
        op: str,
        workspace: str | Path,
        *,
        shapes: list[str] | None = None,
        modes: tuple[str, ...] | list[str] = ("fwd", "fwdbwd"),
        dtype: str | None = None,
        target: str = "operator",
        quick: bool = False,
        files: list[str] | None = None,
        extra_files: list[str] | None = None,
        suite: str = DEFAULT_SUITE,
        suite_pythonpath: list[str] | None = None,
        source_root: str | Path | None = None,
        python: str | None = None,
    ) -> Workspace:
        """Record the baseline of ``op`` in a new workspace directory.

        Snapshots the op's source files from ``source_root``, runs the suite on that snapshot
        (correctness gate, then timing) and keeps the artifact as ``baseline/bench.json``.

        Args:
            op: public op name; its files come from :func:`sources.op_source_files` unless
                ``files`` is given.
            workspace: directory to create (must not exist or be empty).
            shapes: suite shape keys; ``None`` = the suite's shape set for the op.
            modes: subset of ``("fwd", "fwdbwd")``.
            dtype: suite dtype name (``"bfloat16"``, ``"float16"``, ``"float32"``); ``None``: the
                suite's default, bfloat16 on a GPU/NPU and float32 on the CPU interpreter.
            target: ``"operator"`` (compare on whole-op time) or ``"kernel"`` (kernel time
                where the artifact has it).
            quick: run the suite's quick settings for every canonical run (CPU smoke use).
            files, extra_files: override / extend the source file list (repository-relative).
            suite, suite_pythonpath: benchmark function ``"module:function"`` and extra
                import directories for it (default: ``fla_ascend.bench.suite:run_suite``).
            source_root: directory holding the ``fla_ascend`` package to snapshot from;
                default the imported package's checkout.
            python: interpreter for benchmark subprocesses; default the running one.

        Returns:
            The new :class:`Workspace`.

        Raises:
            ValueError: bad argument (named).
            RoundError: the directory is not empty, or the baseline's correctness gate fails
                (the failing cases are listed; nothing is recorded).
        """
        if target not in TARGETS:
            raise ValueError(f"target must be one of {sorted(TARGETS)}, got {target!r}")
        modes = list(modes)
        ws = Path(workspace).resolve()
        if ws.exists() and (not ws.is_dir() or any(ws.iterdir())):
            raise RoundError(f"workspace {ws} already exists and is not empty; open it with Workspace({str(ws)!r})")
        root = Path(source_root).resolve() if source_root is not None else _src.package_root()
        file_list = list(files) if files is not None else _src.op_source_files(op, root)
        file_list = sorted({_src.check_snapshot_path(f) for f in file_list + list(extra_files or [])})
        if not file_list:
            raise ValueError(f"op {op!r} has no source files to snapshot")
        if dtype is None:  # the suite's own default, recorded by name
            from fla_ascend.bench.suite import parse_dtype

            dtype = str(parse_dtype(None)).removeprefix("torch.")
        request = SuiteRequest(ops=[op], shapes=shapes, modes=modes, dtype=dtype, quick=quick,
                               suite=suite, pythonpath=[str(Path(p).resolve()) for p in suite_pythonpath or []])
        request.validate()
        ws.mkdir(parents=True, exist_ok=True)
        base = ws / "baseline"
        try:
            hashes = _src.snapshot(file_list, root, base / "src")
            art = run_suite_isolated(request, base / "src", file_list, python=python)
            corr = correctness_of(art)
            if corr["status"] != "passed":
                raise RoundError(
                    f"refusing to record a baseline whose correctness fails: {len(corr['failing'])} of "
                    f"{corr['n_cases']} cases fail the gate: {_fmt_failing(corr['failing'])}"
                )
        except BaseException:
            shutil.rmtree(ws, ignore_errors=True)
            raise
        _write(base / "bench.json", art)
        _write(base / "state.json", {
            "schema": ROUND_SCHEMA, "name": "baseline", "created": _now(),
            "source_hashes": hashes, "source_hash": _src.source_hash(hashes),
            "correctness": corr | {"evidence": "baseline/bench.json"},
            "benchmark": {"status": "passed", "artifact": "baseline/bench.json",
                          "artifact_sha256": _src.file_sha256(base / "bench.json"),
                          "source_hash": _src.source_hash(hashes), "meta": _meta_brief(art)},
        })
        config = {
            "schema": WORKSPACE_SCHEMA, "op": op, "created": _now(), "files": file_list,
            "target": target, "metric": TARGETS[target], "python": python,
            "suite": {"function": suite, "shapes": shapes, "modes": modes, "dtype": dtype,
                      "quick": quick, "provider": "fla_ascend", "pythonpath": request.pythonpath},
            "best": "baseline", "open_round": None, "rounds": [],
        }
        _write(ws / "workspace.json", config)
        self = cls(ws)
        self._init_ledger(art, corr)
        return self

    # ------------------------------------------------------------------ helpers
    def _save_config(self) -> None:
        _write(self.path / "workspace.json", self.config)

    def _request(self, quick: bool | None = None, shapes: list[str] | None = None) -> SuiteRequest:
        s = self.config["suite"]
        return SuiteRequest(ops=[self.config["op"]], shapes=shapes if shapes is not None else s["shapes"],
                            modes=s["modes"], dtype=s["dtype"], quick=s["quick"] if quick is None else quick,
                            suite=s["function"], pythonpath=s["pythonpath"])

    def _dir(self, name: str) -> Path:
        return self.path / name

    def _src_dir(self, name: str) -> Path:
        return self._dir(name) / "src"

    def _state_path(self, name: str) -> Path:
        return self._dir(name) / ("state.json" if name == "baseline" else "round-state.json")

    def state_of(self, name: str) -> dict:
        """Parsed state of ``"baseline"`` or ``"round-N"``."""
        return _read(self._state_path(name))

    def open_round(self) -> RoundInfo:
        """The open round.

        Raises:
            RoundError: no round is open.
        """
        n = self.config.get("open_round")
        if n is None:
            raise RoundError("no round is open; start one with `fla-ascend round start --hypothesis TEXT`")
        p = self._dir(f"round-{n}")
        return RoundInfo(n, p, _read(p / "round-state.json"))

    def _save_round(self, r: RoundInfo) -> None:
        r.state["updated"] = _now()
        _write(r.path / "round-state.json", r.state)

    def _log(self, r: RoundInfo, title: str, body: str = "") -> None:
        _append(r.path / "attempts.md",
                f"\n## {_now()} {title}\n\n{body.rstrip()}\n" if body else f"\n## {_now()} {title}\n")

    def _current_hashes(self, r: RoundInfo) -> dict[str, str]:
        return _src.tree_hashes(self.config["files"], r.path / "src")

    def changed_files(self, r: RoundInfo | None = None) -> list[str]:
        """Files whose snapshot in the open round (or ``r``) differs from its parent's."""
        r = r or self.open_round()
        parent = self.state_of(r.state["parent"])["source_hashes"]
        cur = self._current_hashes(r)
        return [f for f in self.config["files"] if cur.get(f) != parent.get(f)]

    # ------------------------------------------------------------------ round lifecycle
    def start(self, hypothesis: str, analysis_level: str = "pattern", reason: str | None = None) -> RoundInfo:
        """Open ``round-N`` from the best (last accepted) round or the baseline.

        Args:
            hypothesis: what this round changes and why it should be faster (non-empty).
            analysis_level: ``"pattern"``, ``"profile"`` or ``"ir"``: the primary evidence level.
            reason: why that level (optional, logged).

        Raises:
            ValueError: empty hypothesis or unknown level.
            RoundError: a round is already open (it must be submitted first).
        """
        if not isinstance(hypothesis, str) or not hypothesis.strip():
            raise ValueError("hypothesis must be a non-empty string saying what the round changes and why")
        if analysis_level not in ANALYSIS_LEVELS:
            raise ValueError(f"analysis_level must be one of {ANALYSIS_LEVELS}, got {analysis_level!r}")
        if self.config.get("open_round") is not None:
            n = self.config["open_round"]
            raise RoundError(f"round-{n} is still open; submit it "
                             "(`fla-ascend round submit --status accepted|rejected`) before starting another")
        n = len(self.config["rounds"]) + 1
        parent = self.config["best"]
        path = self._dir(f"round-{n}")
        if path.exists():
            raise RoundError(f"{path} exists although workspace.json lists {n - 1} rounds; "
                             "the workspace is inconsistent")
        path.mkdir()
        shutil.copytree(self._src_dir(parent), path / "src")
        state = {
            "schema": ROUND_SCHEMA, "name": f"round-{n}", "round": n, "parent": parent, "created": _now(),
            "hypothesis": hypothesis.strip(), "analysis_level": analysis_level, "status": "open",
            "state_history": [{"at": _now(), "analysis_level": analysis_level, "reason": reason or ""}],
            "correctness": {"status": "not_run"}, "benchmark": {"status": "not_run"}, "comparison": None,
            "probes": 0,
        }
        r = RoundInfo(n, path, state)
        self._save_round(r)
        (path / "attempts.md").write_text(f"# round-{n} attempts ({self.config['op']})\n")
        self._log(r, "State Update: round opened", (
            f"- Parent: {parent}\n- Hypothesis: {hypothesis.strip()}\n"
            f"- Primary analysis level: {analysis_level}\n" + (f"- Reason: {reason}\n" if reason else "")
            + f"- Candidate sources: round-{n}/src/ (copied from {parent}); edit them there or run `round sync`"
        ))
        self.config["open_round"] = n
        self._save_config()
        return r

    def set_state(self, analysis_level: str, reason: str) -> RoundInfo:
        """Change the open round's primary analysis level, with the reason (logged).

        Raises:
            ValueError: unknown level or empty reason.
            RoundError: no open round.
        """
        if analysis_level not in ANALYSIS_LEVELS:
            raise ValueError(f"analysis_level must be one of {ANALYSIS_LEVELS}, got {analysis_level!r}")
        if not reason or not reason.strip():
            raise ValueError("reason must say why the analysis level changes")
        r = self.open_round()
        old = r.state["analysis_level"]
        r.state["analysis_level"] = analysis_level
        r.state["state_history"].append({"at": _now(), "analysis_level": analysis_level, "reason": reason})
        self._save_round(r)
        self._log(r, "State Update: analysis level",
                  f"- Escalation: {old} -> {analysis_level}\n- Escalation reason: {reason}")
        return r

    def log(self, text: str) -> RoundInfo:
        """Append a free note (a code change, an observation) to the open round's attempts.md."""
        if not text or not text.strip():
            raise ValueError("text must be non-empty")
        r = self.open_round()
        self._log(r, "Note", text)
        return r

    def sync(self, source_root: str | Path | None = None) -> list[str]:
        """Copy the op's files from a checkout (default: the imported package's) into the open
        round's snapshot, for engineers who edit in place. Returns the files changed vs parent.

        Raises:
            RoundError: no open round.
            FileNotFoundError: a source file is missing under ``source_root``.
        """
        r = self.open_round()
        root = Path(source_root).resolve() if source_root is not None else _src.package_root()
        _src.snapshot(self.config["files"], root, r.path / "src")
        changed = self.changed_files(r)
        self._log(r, "Snapshot synced from checkout",
                  f"- From: {root}\n- Changed vs parent: {', '.join(changed) or 'none'}")
        return changed

    def probe(self, n_shapes: int = 2) -> dict:
        """Screening run: parent and candidate with the suite's quick settings on the first
        ``n_shapes`` shapes of the baseline. Written to ``round-N/probes/probe-K.json``, labelled
        as screening; never the round's result, never read by compare or submit.

        Returns:
            The probe record: ``label``, ``verdict`` (``likely_gain`` / ``likely_regression`` /
            ``inconclusive`` / ``candidate_incorrect``), ``screen`` (a comparison dict).

        Raises:
            ValueError: ``n_shapes`` < 1.
            RoundError: no open round.
        """
        if not isinstance(n_shapes, int) or n_shapes < 1:
            raise ValueError(f"n_shapes must be an int >= 1, got {n_shapes!r}")
        r = self.open_round()
        base_art = _read(self._dir("baseline") / "bench.json")
        shapes = list(dict.fromkeys(x["shape"] for x in base_art["results"]))[:n_shapes]
        req = self._request(quick=True, shapes=shapes)
        parent = r.state["parent"]
        py = self.config.get("python")
        par_art = run_suite_isolated(req, self._src_dir(parent), self.config["files"], python=py)
        cand_art = run_suite_isolated(req, r.path / "src", self.config["files"], python=py)
        corr = correctness_of(cand_art)
        screen = compare_artifacts(par_art, cand_art, metric=self.config["metric"])
        g = screen["summary"]["geomean_speedup"]
        if corr["status"] != "passed":
            verdict = "candidate_incorrect"
        elif g is None:
            verdict = "inconclusive"
        else:
            verdict = "likely_gain" if g > 1.05 else "likely_regression" if g < 0.95 else "inconclusive"
        k = r.state.get("probes", 0) + 1
        (r.path / "probes").mkdir(exist_ok=True)
        rec = {"label": PROBE_LABEL, "verdict": verdict, "shapes": shapes, "parent": parent,
               "candidate_source_hash": _src.source_hash(self._current_hashes(r)),
               "candidate_correctness": corr, "screen": screen, "parent_artifact": par_art,
               "candidate_artifact": cand_art}
        _write(r.path / "probes" / f"probe-{k}.json", rec)
        r.state["probes"] = k
        self._save_round(r)
        self._log(r, f"Probe {k} ({PROBE_LABEL})", (
            f"- Verdict (screening): {verdict}\n- Shapes: {', '.join(shapes)}\n"
            f"- Candidate correctness (quick): {corr['status']}\n- Evidence: round-{r.n}/probes/probe-{k}.json"
        ))
        return rec

    def bench(self) -> dict:
        """Correctness gate, then the canonical benchmark of the open round's snapshot.

        On a passed gate the artifact becomes ``round-N/bench.json``; on a failed gate the suite
        output is kept as ``round-N/correctness.json`` and the benchmark is ``not_run``. A new
        bench invalidates an earlier comparison.

        Returns:
            The round state after the run.

        Raises:
            RoundError: no open round.
            RunnerError: the suite subprocess failed.
        """
        r = self.open_round()
        hashes = self._current_hashes(r)
        shash = _src.source_hash(hashes)
        art = run_suite_isolated(self._request(), r.path / "src", self.config["files"],
                                 python=self.config.get("python"))
        corr = correctness_of(art)
        for stale in ("bench.json", "correctness.json", "compare.json", "compare.md"):
            (r.path / stale).unlink(missing_ok=True)
        r.state["comparison"] = None
        r.state["source_hashes"] = hashes
        if corr["status"] == "passed":
            _write(r.path / "bench.json", art)
            r.state["correctness"] = corr | {"evidence": f"round-{r.n}/bench.json", "source_hash": shash}
            r.state["benchmark"] = {"status": "passed", "artifact": f"round-{r.n}/bench.json",
                                    "artifact_sha256": _src.file_sha256(r.path / "bench.json"),
                                    "source_hash": shash, "meta": _meta_brief(art)}
            body = (f"- Correctness: passed ({corr['n_cases']} cases"
                    + (f", worst rel_rmse {corr['worst']['rel_rmse']:.3g} at {corr['worst']['key']}"
                       if corr["worst"] else "")
                    + f")\n- Canonical artifact: round-{r.n}/bench.json\n- Next: `fla-ascend round compare`")
        else:
            _write(r.path / "correctness.json", art)
            r.state["correctness"] = corr | {"evidence": f"round-{r.n}/correctness.json", "source_hash": shash}
            r.state["benchmark"] = {"status": "not_run", "reason": "correctness gate failed"}
            body = (f"- Correctness: FAILED, {len(corr['failing'])} of {corr['n_cases']} cases: "
                    f"{_fmt_failing(corr['failing'])}\n"
                    f"- Evidence: round-{r.n}/correctness.json\n"
                    "- No canonical artifact; this round can only be submitted as rejected")
        self._save_round(r)
        self._log(r, "Canonical bench", body)
        return r.state

    def compare(self, metric: str | None = None) -> dict:
        """Compare the open round's canonical artifact with the baseline's and the parent's.

        Writes ``round-N/compare.json`` and ``compare.md``.

        Args:
            metric: ``"total-op"`` or ``"kernel"``; default from the workspace target.

        Returns:
            ``{"vs_baseline": comparison, "vs_parent": comparison, ...}`` (see
            :func:`compare.compare_artifacts`).

        Raises:
            RoundError: no open round, or no passed canonical artifact of the current snapshot.
            ComparisonError: artifacts from different devices / timing methods.
        """
        r = self.open_round()
        self._require_fresh_bench(r)
        metric = metric or self.config["metric"]
        new = _read(r.path / "bench.json")
        parent = r.state["parent"]
        vs_base = compare_artifacts(_read(self._dir("baseline") / "bench.json"), new, metric)
        vs_par = (vs_base if parent == "baseline"
                  else compare_artifacts(_read(self._dir(parent) / "bench.json"), new, metric))
        out = {"round": f"round-{r.n}", "parent": parent, "metric": metric,
               "artifact": f"round-{r.n}/bench.json", "artifact_sha256": r.state["benchmark"]["artifact_sha256"],
               "vs_baseline": vs_base, "vs_parent": vs_par, "created": _now()}
        _write(r.path / "compare.json", out)
        md = (f"# round-{r.n} comparison (from `fla-ascend round compare`)\n\n"
              + comparison_markdown(vs_base, "vs baseline") + "\n"
              + comparison_markdown(vs_par, f"vs parent ({parent})"))
        (r.path / "compare.md").write_text(md)
        eff = vs_base["effective_metric_source"]
        r.state["comparison"] = {
            "file": f"round-{r.n}/compare.json", "artifact_sha256": out["artifact_sha256"],
            "effective_metric_source": eff,
            "vs_baseline": vs_base["summary"], "vs_parent": vs_par["summary"],
            "warnings": vs_base["warnings"] + [w for w in vs_par["warnings"] if w not in vs_base["warnings"]],
        }
        self._save_round(r)
        sb, sp = vs_base["summary"], vs_par["summary"]
        self._log(r, "Compare", (
            f"- Metric source: {eff}\n- vs baseline: geomean {fmt_speedup(sb['geomean_speedup'])}, "
            f"avg improvement {fmt_pct(sb['avg_improvement_pct'])} ({sb['n_cases']} cases)\n"
            f"- vs parent ({parent}): geomean {fmt_speedup(sp['geomean_speedup'])}, "
            f"avg improvement {fmt_pct(sp['avg_improvement_pct'])} ({sp['n_cases']} cases)\n"
            f"- Evidence: round-{r.n}/compare.json"
        ))
        return out

    def _require_fresh_bench(self, r: RoundInfo) -> None:
        b = r.state["benchmark"]
        if b.get("status") != "passed" or not (r.path / "bench.json").is_file():
            why = ("its correctness gate failed" if r.state["correctness"]["status"] == "failed"
                   else "it has not been run")
            raise RoundError(f"round-{r.n} has no canonical benchmark artifact ({why}); "
                             "run `fla-ascend round bench` first")
        if _src.source_hash(self._current_hashes(r)) != b.get("source_hash"):
            raise RoundError(f"round-{r.n}/src changed after the last bench; run `fla-ascend round bench` again")
        if _src.file_sha256(r.path / "bench.json") != b.get("artifact_sha256"):
            raise RoundError(f"round-{r.n}/bench.json was modified after the bench wrote it; "
                             "run `fla-ascend round bench` again")

    def missing_for(self, status: str, r: RoundInfo | None = None, allow_slower: str | None = None,
                    note: str | None = None) -> list[str]:
        """What the open round lacks for ``status`` (empty list: it may be submitted)."""
        r = r or self.open_round()
        missing = []
        if not (r.path / "src").is_dir():
            missing.append(f"the source snapshot round-{r.n}/src")
        cur = _src.source_hash(self._current_hashes(r))
        corr = r.state["correctness"]
        if status == "accepted":
            if not self.changed_files(r):
                missing.append(f"a change: round-{r.n}/src is identical to its parent {r.state['parent']}")
            if corr["status"] == "failed":
                missing.append("a passed correctness gate (it failed: submit this round as rejected)")
            elif corr["status"] != "passed":
                missing.append("a correctness result (run `fla-ascend round bench`)")
            elif corr.get("source_hash") != cur:
                missing.append("a correctness result of the current snapshot (src changed after bench)")
            try:
                if corr["status"] == "passed":
                    self._require_fresh_bench(r)
            except RoundError as e:
                missing.append(f"a canonical benchmark artifact of the current snapshot ({e})")
            cmp_ = r.state.get("comparison")
            if not cmp_ or not (r.path / "compare.json").is_file():
                missing.append("a comparison (run `fla-ascend round compare`)")
            elif cmp_.get("artifact_sha256") != r.state["benchmark"].get("artifact_sha256"):
                missing.append("a comparison of the current artifact (run `fla-ascend round compare` again)")
            else:
                g = cmp_["vs_parent"].get("geomean_speedup")
                if g is None:
                    missing.append("at least one case timed in both the parent's and this round's artifact")
                elif g < 1.0 and not (allow_slower and allow_slower.strip()):
                    missing.append(f"a speedup over the parent (geomean {g:.3f}x < 1): submit as rejected, "
                                   "or pass --allow-slower REASON")
        elif status == "rejected":
            if corr["status"] == "not_run" and not (note and note.strip()):
                missing.append("a correctness result or a --note saying why the round is closed without one")
        else:
            raise ValueError(f"status must be 'accepted' or 'rejected', got {status!r}")
        return missing

    def submit(self, status: str, note: str | None = None, allow_slower: str | None = None) -> RoundInfo:
        """Close the open round as ``accepted`` or ``rejected``.

        Validates what the status requires (:meth:`missing_for`), writes ``summary.md``, appends
        the round to ``opt-note.md`` and regenerates its Overall Summary. An accepted round
        becomes the parent of the next one.

        Args:
            status: ``"accepted"`` or ``"rejected"``.
            note: conclusion in the engineer's words (optional; required for a rejected round
                that never ran its correctness gate).
            allow_slower: reason for accepting a round slower than its parent (geomean < 1).

        Raises:
            ValueError: unknown status.
            RoundError: no open round, or the round lacks something (the message lists it all).
        """
        if status not in ("accepted", "rejected"):
            raise ValueError(f"status must be 'accepted' or 'rejected', got {status!r}")
        r = self.open_round()
        missing = self.missing_for(status, r, allow_slower=allow_slower, note=note)
        if missing:
            raise RoundError(f"refusing to submit round-{r.n} as {status}; missing:\n- " + "\n- ".join(missing))
        r.state["status"] = status
        r.state["submitted"] = _now()
        r.state["changed_files"] = self.changed_files(r)
        r.state["note"] = note or ""
        if allow_slower and status == "accepted":
            r.state["allow_slower"] = allow_slower
        self._save_round(r)
        (r.path / "summary.md").write_text(self._summary_md(r))
        self._log(r, f"Submitted: {status}",
                  f"- Summary: round-{r.n}/summary.md" + (f"\n- Note: {note}" if note else ""))
        self.config["rounds"].append({"n": r.n, "status": status, "parent": r.state["parent"]})
        if status == "accepted":
            self.config["best"] = f"round-{r.n}"
        self.config["open_round"] = None
        self._save_config()
        self._append_ledger(r)
        return r

    def lesson(self, text: str, evidence: str | Path, scope: str | None = None) -> str:
        """Append a reusable lesson to ``learned_lessons.md``, citing an evidence file.

        Args:
            text: the rule or heuristic (at least 20 characters).
            evidence: a file inside the workspace (absolute, or relative to the workspace or the
                current directory) that supports it: an artifact, compare.json, a profile, IR.
            scope: where the lesson applies or what limits it (optional).

        Returns:
            The entry appended.

        Raises:
            ValueError: text too short.
            RoundError: the evidence file does not exist or lies outside the workspace.
        """
        if not isinstance(text, str) or len(text.strip()) < 20:
            raise ValueError("a lesson must be a reusable rule of at least 20 characters")
        p = Path(evidence)
        cands = [p] if p.is_absolute() else [self.path / p, Path.cwd() / p]
        found = next((c.resolve() for c in cands if c.is_file()), None)
        if found is None:
            raise RoundError(f"evidence file {evidence} does not exist (looked at {', '.join(str(c) for c in cands)})")
        try:
            rel = found.relative_to(self.path).as_posix()
        except ValueError:
            raise RoundError(f"evidence {found} is outside the workspace {self.path}; "
                             "copy it into the round's directory first") from None
        entry = (f"\n## {_now()}\n\n{text.strip()}\n\n- Evidence: {rel} (sha256 {_src.file_sha256(found)[:12]})\n"
                 + (f"- Applies to: {scope}\n" if scope else ""))
        lp = self.path / "learned_lessons.md"
        if not lp.exists():
            lp.write_text(f"# Learned lessons ({self.config['op']})\n\n"
                          "Appended only by `fla-ascend round lesson`; each cites evidence in this workspace.\n")
        _append(lp, entry)
        return entry

    def status(self) -> dict:
        """Workspace summary: op, best, open round (with its gate states), submitted rounds."""
        out = {"workspace": str(self.path), "op": self.config["op"], "best": self.config["best"],
               "rounds": self.config["rounds"], "open_round": None}
        if self.config.get("open_round") is not None:
            r = self.open_round()
            out["open_round"] = {
                "name": f"round-{r.n}", "parent": r.state["parent"], "hypothesis": r.state["hypothesis"],
                "analysis_level": r.state["analysis_level"], "correctness": r.state["correctness"]["status"],
                "benchmark": r.state["benchmark"]["status"], "compared": bool(r.state.get("comparison")),
                "changed_files": self.changed_files(r),
                "missing_for_accepted": self.missing_for("accepted", r),
            }
        return out

    # ------------------------------------------------------------------ ledger
    def _init_ledger(self, art: dict, corr: dict) -> None:
        m = art["meta"]
        text = (
            f"# Optimisation ledger: {self.config['op']}\n\n"
            "Written by `fla-ascend round`; speedups below come only from `round compare` artifacts.\n\n"
            "## Baseline\n\n"
            f"- Recorded: {self.config['created']}\n"
            f"- Source files: {', '.join(self.config['files'])}\n"
            f"- Device: {m.get('device')} ({m.get('device_name')}); "
            f"Triton: {m.get('triton_flavour')} {m.get('triton_version')}; "
            f"torch {m.get('torch_version')}\n"
            f"- Timing: {m.get('timing_method')}\n"
            f"- Correctness: {corr['status']} ({corr['n_cases']} cases)\n"
            f"- Artifact: baseline/bench.json\n\n## Rounds\n\n{OVERALL}\n\nNo round submitted yet.\n"
        )
        (self.path / "opt-note.md").write_text(text)

    def _round_lines(self, r: RoundInfo) -> list[str]:
        s = r.state
        corr = s["correctness"]
        lines = [
            f"- Status: **{s['status']}**", f"- Parent: {s['parent']}", f"- Hypothesis: {s['hypothesis']}",
            f"- Primary analysis level: {s['analysis_level']}",
            f"- Changed files: {', '.join(s.get('changed_files') or []) or 'none'}",
        ]
        if corr["status"] == "passed":
            w = corr.get("worst")
            lines.append(f"- Correctness: passed ({corr['n_cases']} cases"
                         + (f", worst rel_rmse {w['rel_rmse']:.3g}" if w else "") + ")")
        elif corr["status"] == "failed":
            lines.append(f"- Correctness: FAILED ({_fmt_failing(corr['failing'], 3)}); evidence {corr['evidence']}")
        else:
            lines.append("- Correctness: not run")
        b = s["benchmark"]
        lines.append(f"- Benchmark: {b['artifact']} ({b['meta'].get('timing_method')})" if b.get("status") == "passed"
                     else f"- Benchmark: {b.get('status')}" + (f" ({b['reason']})" if b.get("reason") else ""))
        c = s.get("comparison")
        if c:
            for label, key in (("vs baseline", "vs_baseline"), (f"vs parent ({s['parent']})", "vs_parent")):
                v = c[key]
                lines.append(f"- {label}: geomean {fmt_speedup(v['geomean_speedup'])}, avg improvement "
                             f"{fmt_pct(v['avg_improvement_pct'])} over {v['n_cases']} cases "
                             f"({c['effective_metric_source']}, from {c['file']})")
            for w in c.get("warnings", []):
                lines.append(f"- Warning: {w}")
        if s.get("allow_slower"):
            lines.append(f"- Accepted although slower than its parent: {s['allow_slower']}")
        if s.get("note"):
            lines.append(f"- Note: {s['note']}")
        return lines

    def _summary_md(self, r: RoundInfo) -> str:
        out = [f"# round-{r.n} summary ({self.config['op']})", ""] + self._round_lines(r)
        if (r.path / "compare.md").is_file() and r.state.get("comparison"):
            out += ["", "## Comparison", "", (r.path / "compare.md").read_text().split("\n", 2)[2]]
        hist = r.state.get("state_history", [])
        if len(hist) > 1:
            out += ["", "Analysis level history: " + " -> ".join(h["analysis_level"] for h in hist)]
        return "\n".join(out).rstrip() + "\n"

    def _append_ledger(self, r: RoundInfo) -> None:
        note = self.path / "opt-note.md"
        text = note.read_text()
        head, _, _ = text.partition(f"\n{OVERALL}\n")
        entry = (f"### round-{r.n}: {r.state['status']} ({r.state['submitted']})\n\n"
                 + "\n".join(self._round_lines(r)) + "\n\n")
        note.write_text(head.rstrip("\n") + "\n\n" + entry + self._overall())

    def _overall(self) -> str:
        rows = ["| round | status | parent | hypothesis | geomean vs baseline | vs parent | metric |",
                "|---|---|---|---|---:|---:|---|"]
        for e in self.config["rounds"]:
            s = self.state_of(f"round-{e['n']}")
            c = s.get("comparison")
            gb = fmt_speedup(c["vs_baseline"]["geomean_speedup"]) if c else "n/a"
            gp = fmt_speedup(c["vs_parent"]["geomean_speedup"]) if c else "n/a"
            hyp = s["hypothesis"].replace("|", "/")
            rows.append(f"| round-{e['n']} | {s['status']} | {s['parent']} | {hyp[:80]} | {gb} | {gp} | "
                        f"{c['effective_metric_source'] if c else 'n/a'} |")
        best = self.config["best"]
        n_acc = sum(e["status"] == "accepted" for e in self.config["rounds"])
        n_rej = sum(e["status"] == "rejected" for e in self.config["rounds"])
        if best == "baseline":
            verdict = "No accepted round: the baseline is still the best implementation."
        else:
            c = self.state_of(best)["comparison"]
            v = c["vs_baseline"]
            verdict = (f"Best: {best}, geomean {fmt_speedup(v['geomean_speedup'])} vs baseline, average improvement "
                       f"{fmt_pct(v['avg_improvement_pct'])} over {v['n_cases']} cases "
                       f"({c['effective_metric_source']}, "
                       f"from {c['file']}).")
        return (f"{OVERALL}\n\n{len(self.config['rounds'])} rounds submitted: {n_acc} accepted, {n_rej} rejected. "
                f"{verdict}\n\n" + "\n".join(rows) + "\n")


def _meta_brief(art: dict) -> dict:
    m = art.get("meta", {})
    return {k: m.get(k) for k in ("device", "device_name", "triton_flavour", "triton_version",
                                  "torch_version", "timing_method", "date")}
