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


@pytest.mark.parametrize("func", ["good_copy_kernel", "good_dot_kernel", "bad_gather_kernel", "bad_oversized_kernel"])
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
