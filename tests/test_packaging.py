"""What fla-ascend installs: the kernels with torch and one Triton alone, the workbench behind the
``lab`` extra.

- pyproject.toml: the only unconditional dependency is torch; a Triton comes from exactly one
  extra (``triton``/``cuda`` or ``npu``/``npu-check``; pip cannot say "one of the two"), the
  workbench's packages from ``lab``, and scripts/setup_env.sh installs ``lab`` in both CI
  environments (scripts/test.sh also builds a plain venv with torch and ``fla-ascend[triton]`` alone:
  scripts/bare_install_check.sh);
- the kernel modules import only the standard library, torch, triton, torch_npu (guarded) and, in
  the transformers integration, transformers, in the fla integration, fla (inside its functions);
- in a subprocess whose ``sys.modules`` refuses pandas, matplotlib and rich (``sys.modules[name] =
  None`` makes ``import name`` raise ``ImportError``), ``fla_ascend``, ``ops``, ``modules``, ``layers``
  and ``integrations.transformers`` import and an op runs, while every workbench package raises an
  ``ImportError`` that names the extra and ``fla-ascend`` prints it and exits with status 1.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fla_ascend._extras import LAB, MissingExtraError, install_hint, missing, require

ROOT = Path(__file__).resolve().parents[1]
WORKBENCH_DEPS = ("pandas", "matplotlib", "rich")
KERNEL_PACKAGES = ("fla_ascend.ops", "fla_ascend.modules", "fla_ascend.layers", "fla_ascend.integrations",
                   "fla_ascend.tiling")
WORKBENCH_PACKAGES = ("fla_ascend.profiling", "fla_ascend.check", "fla_ascend.estimate", "fla_ascend.ir",
                      "fla_ascend.bench", "fla_ascend.round", "fla_ascend.console")
HINT = 'pip install "fla-ascend[lab]" (from a clone: pip install ".[lab]")'


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower().replace("_", "-")


@pytest.fixture(scope="module")
def project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_kernels_depend_on_torch_alone(project):
    """``pip install --no-deps .`` records these as Requires-Dist without a marker: torch only."""
    assert [_name(r) for r in project["dependencies"]] == ["torch"]


def test_each_triton_extra_brings_exactly_one_triton(project):
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    assert "triton" in extras["triton"] and "triton" in extras["cuda"]
    assert "triton-ascend" in extras["npu"] and "triton-ascend" in extras["npu-check"]
    assert not [k for k, names in extras.items() if {"triton", "triton-ascend"} <= names]
    assert "numpy" in extras["triton"]  # Triton's interpreter imports it without declaring it


def test_the_lab_extra_is_what_the_workbench_checks_for(project):
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    assert extras["lab"] == set(LAB)
    assert set(LAB) <= extras["npu-check"]  # `fla-ascend check` is a workbench command


def test_setup_env_installs_the_workbench():
    text = (ROOT / "scripts" / "setup_env.sh").read_text()
    flavours = dict(re.findall(r'^\s*(ascend|triton)\).*?extras="([^"]+)"', text, re.M))
    assert set(flavours) == {"ascend", "triton"}
    for flavour, extras in flavours.items():
        assert {"lab", "test", "transformers"} <= set(extras.split(",")), flavour
    assert "npu-check" in flavours["ascend"].split(",") and "triton" in flavours["triton"].split(",")
    assert "bash scripts/bare_install_check.sh" in (ROOT / "scripts" / "test.sh").read_text()


def _third_party_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out - set(sys.stdlib_module_names) - {"fla_ascend", "__future__"}


def test_kernel_modules_import_only_torch_and_triton():
    allowed = {"torch", "triton", "torch_npu"}
    files = [ROOT / "fla_ascend" / "backend.py"] + [
        p for pkg in KERNEL_PACKAGES for p in sorted((ROOT / pkg.replace(".", "/")).rglob("*.py"))]
    bad = {}
    for path in files:
        integration = {"transformers.py": {"transformers"}, "fla.py": {"fla"}}
        extra = integration.get(path.name, set()) if path.parent.name == "integrations" else set()
        found = _third_party_imports(path) - allowed - extra
        if found:
            bad[str(path.relative_to(ROOT))] = sorted(found)
    assert not bad, bad


BLOCK = "import sys\nfor _n in {names!r}:\n    sys.modules[_n] = None\n"


def _run(code: str, blocked=WORKBENCH_DEPS) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK.format(names=tuple(blocked)) + textwrap.dedent(code)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_kernels_run_without_the_workbench_packages():
    proc = _run("""
        import fla_ascend, fla_ascend.ops, fla_ascend.modules, fla_ascend.layers
        import fla_ascend.integrations.transformers
        import torch
        from fla_ascend import backend
        from fla_ascend.ops import l2norm
        x = torch.randn(2, 3, 16, device=backend.device())
        y = l2norm(x)
        assert torch.allclose(y, x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6), atol=1e-5)
        assert fla_ascend.fused_recurrent_gated_delta_rule is not None
        workbench = sorted(m for m in sys.modules if m.split(".")[:2] in (
            ["fla_ascend", "check"], ["fla_ascend", "profiling"], ["fla_ascend", "bench"], ["fla_ascend", "round"],
            ["fla_ascend", "console"], ["fla_ascend", "cli"]))
        print("WORKBENCH", workbench)
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WORKBENCH []" in proc.stdout, proc.stdout


def test_every_workbench_package_names_the_extra():
    proc = _run(f"""
        import importlib, json
        out = {{}}
        for name in {WORKBENCH_PACKAGES!r} + ("fla_ascend.profiling.readers", "fla_ascend.estimate.model"):
            try:
                importlib.import_module(name)
                out[name] = None
            except ImportError as e:
                out[name] = [type(e).__name__, str(e)]
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, err in results.items():
        owner = ".".join(name.split(".")[:2])
        assert err is not None, f"{name} imported without pandas, matplotlib and rich"
        kind, message = err
        assert kind == "MissingExtraError" and message.startswith(f"{owner} needs ") and message.endswith(HINT), err


def test_the_command_says_what_to_install():
    proc = _run("""
        from fla_ascend.cli import main
        sys.exit(main(["info"]))
    """)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("fla-ascend: fla_ascend.") and HINT in proc.stderr and "Traceback" not in proc.stderr


def test_require_names_the_module_and_the_extra():
    assert missing("json", "fla_ascend_no_such_module", "no_such.sub") == ["fla_ascend_no_such_module", "no_such.sub"]
    require("x", "json")  # present: nothing raised
    with pytest.raises(MissingExtraError) as e:
        require("fla_ascend.thing", "json", "fla_ascend_no_such_module", extra="compare")
    assert isinstance(e.value, ImportError) and e.value.name == "fla_ascend_no_such_module"
    assert str(e.value) == f"fla_ascend.thing needs fla_ascend_no_such_module: {install_hint('compare')}"
    assert install_hint() == HINT
