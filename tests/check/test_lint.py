"""Source lint rules: each bad pattern fires, the good kernels stay clean (pure AST: runs in
every environment)."""
from pathlib import Path

import pytest

from fla_ascend.check.lint import lint_source

SRC = (Path(__file__).parent / "bad_kernels.py").read_text()


def _codes(func):
    return {f.code for f in lint_source(SRC) if f.function == func}


@pytest.mark.parametrize("func,code", [
    ("bad_inplace_advance_kernel", "inplace_pointer_advance"),
    ("bad_dot_reuse_kernel", "dot_operand_reused"),
    ("bad_runtime_if_kernel", "runtime_if_loads"),
    ("bad_constexpr_size_kernel", "runtime_size_constexpr"),
    ("launch_with_num_warps", "launch_num_warps"),
])
def test_bad_pattern_fires(func, code):
    assert code in _codes(func)


@pytest.mark.parametrize("func", ["good_copy_kernel", "good_dot_kernel", "good_block_ptr_kernel",
                                  "bad_gather_kernel", "bad_oversized_kernel"])
def test_good_patterns_stay_clean(func):
    assert _codes(func) == set()


def test_dot_operand_reloaded_or_reassigned_is_clean():
    src = '''
import triton, triton.language as tl
@triton.jit
def k(a, b, c, BM: tl.constexpr):
    o = tl.arange(0, BM)
    b_a = tl.load(a + o)
    b_c = tl.dot(b_a, b_a)
    b_a = tl.load(b + o)
    tl.store(c + o, b_c + b_a)
    for i in range(4):
        b_x = tl.load(a + o)
        b_c += tl.dot(b_x, b_c)
'''
    assert [f.code for f in lint_source(src)] == []


def test_dot_operand_reused_in_loop_fires():
    src = '''
import triton, triton.language as tl
@triton.jit
def k(a, c, BM: tl.constexpr):
    o = tl.arange(0, BM)
    b_a = tl.load(a + o)
    b_c = tl.zeros([BM, BM], dtype=tl.float32)
    for i in range(4):
        b_c += tl.dot(b_a, b_c)
'''
    assert [f.code for f in lint_source(src)] == ["dot_operand_reused"]


def test_launch_options_route_is_clean():
    src = '''
def launcher(x):
    kernel[(1,)](x, BLOCK=4, **launch_options(num_warps=4))
'''
    assert lint_source(src) == []


def test_block_ptr_unchecked_names_each_unchecked_access():
    found = [f for f in lint_source(SRC) if f.function == "bad_block_ptr_kernel"]
    assert all(f.code == "block_ptr_unchecked" for f in found)
    msgs = [f.message for f in found]
    # the first load (nothing checked), the store through tl.advance (K unchecked) and the load of
    # the advanced pointer (T unchecked); the last store checks both dimensions
    assert len(found) == 3, msgs
    assert any("(0, 1)" in m and "'p_x'" in m for m in msgs)
    assert any("dimension(s) (1,)" in m and "tl.store of block pointer tl.advance(p_y" in m for m in msgs)
    assert any("dimension(s) (0,)" in m and "'p_z'" in m for m in msgs)


def test_block_ptr_with_non_literal_arguments_is_reported():
    src = '''
import triton, triton.language as tl
@triton.jit
def k(x, shape, T, BT: tl.constexpr):
    p = tl.make_block_ptr(x, shape, (1,), (0,), (BT,), (0,))
    tl.load(p, boundary_check=(0,))
    q = tl.make_block_ptr(x, (T,), (1,), (0,), (BT,), (0,))
    chk = (0,)
    tl.load(q, boundary_check=chk)
'''
    found = lint_source(src)
    assert [f.code for f in found] == ["block_ptr_unchecked"] * 2
    assert all("not a literal tuple" in f.message for f in found)


def test_package_has_no_unchecked_block_pointer():
    """Every kernel module of the package is clean of the leftover-DMA rule."""
    import fla_ascend

    root = Path(fla_ascend.__file__).parent
    found = [f"{f.file}:{f.line}" for p in sorted(root.rglob("*.py")) for f in lint_source(p.read_text(), str(p))
             if f.code == "block_ptr_unchecked"]
    assert found == []
