"""bench/device/compiled_flex.py: a "compiled" timing counts only when every timed call ran the one
compiled graph of its pass. A silent eager fallback once made compiled FlexAttention look 25x
slower than it is (issue 46). The mechanism is tested with dynamo and a backend that needs no C++
toolchain (the graph's own forward); the bench uses inductor."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("torch.compile needs torch 2", allow_module_level=True)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "device"))
from compiled_flex import CompiledFlex  # noqa: E402


def attention(q, k, v, scale=1.0):
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v


def graph_forward(gm, example_inputs):
    return gm.forward


def test_every_call_through_the_compiled_graph_is_proven():
    cf = CompiledFlex(torch, attention, compiler=graph_forward)
    q = torch.randn(1, 2, 8, 4)
    for _ in range(3):
        out = cf(q, q, q, scale=0.5)
    torch.testing.assert_close(out, attention(q, q, q, 0.5))
    proof = cf.proof()
    assert proof == {"graphs_compiled": 1, "calls": 3, "compiled_graph_calls": 3,
                     "every_call_ran_the_compiled_graph": True}


def test_an_eager_fallback_is_caught():
    cf = CompiledFlex(torch, attention, compiler=graph_forward)
    q = torch.randn(1, 2, 8, 4)
    cf(q, q, q)
    cf.fn = attention  # what dynamo does after a failed compile: the same calls, run eagerly
    cf(q, q, q)
    assert not cf.proof()["every_call_ran_the_compiled_graph"], cf.proof()


def test_a_recompile_inside_the_timed_calls_is_caught():
    cf = CompiledFlex(torch, attention, compiler=graph_forward)
    cf(torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4), torch.randn(1, 2, 8, 4))
    cf(torch.randn(1, 2, 9, 4), torch.randn(1, 2, 9, 4), torch.randn(1, 2, 9, 4))  # new shape: a second graph
    proof = cf.proof()
    assert proof["graphs_compiled"] == 2 and not proof["every_call_ran_the_compiled_graph"], proof


def test_fresh_starts_a_new_count():
    cf = CompiledFlex(torch, attention, compiler=graph_forward)
    q = torch.randn(1, 2, 8, 4)
    cf(q, q, q)
    cf.fresh()
    assert cf.proof()["calls"] == 0 and cf.proof()["graphs_compiled"] == 0
    cf(q, q, q)
    assert cf.proof()["every_call_ran_the_compiled_graph"]
