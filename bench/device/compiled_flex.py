"""torch.compile(flex_attention) whose every timed call is proven to run the compiled graph: shared
by bench/peers_bench.py (the CPU peers) and bench/device/attention_bench.py (the GPU check), and
carried to the device with bench/device/."""


class CompiledFlex:
    """torch.compile(flex_attention) whose every call is proven to run the compiled graph.

    A failed compile (the CPU backward, which torch 2.6 and 2.15 lack) leaves dynamo running later
    calls of the same function eagerly without a word: on torch 2.15 a compiled forward at N = 1025
    took 271 ms fresh and 1 325 ms after a failed backward (issue 46). So: a fresh dynamo state
    (torch._dynamo.reset()) per pass and after every failure, inductor as the backend through a
    wrapper that counts graphs compiled and calls of the compiled graph, and a check that every
    call made ran it and that the pass compiled once (no recompile inside the timed calls)."""

    def __init__(self, torch, flex_attention, compiler=None):
        """compiler(gm, example_inputs) -> callable: inductor's compile_fx unless given (the tests
        pass one that needs no C++ toolchain)."""
        self.torch, self.flex_attention, self.compiler = torch, flex_attention, compiler
        self.fresh()

    def fresh(self):
        self.torch._dynamo.reset()
        self.graphs_compiled = self.graph_calls = self.calls = 0

        def inductor_counted(gm, example_inputs):
            if self.compiler is None:
                from torch._inductor.compile_fx import compile_fx
                compiled = compile_fx(gm, example_inputs)
            else:
                compiled = self.compiler(gm, example_inputs)
            self.graphs_compiled += 1

            def run(*args):
                self.graph_calls += 1
                return compiled(*args)
            return run
        self.fn = self.torch.compile(self.flex_attention, backend=inductor_counted, dynamic=False, fullgraph=True)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)

    def proof(self):
        # One graph per pass: a recompile inside the timed calls (a guard failing on every call)
        # would be timed as the kernel.
        return {"graphs_compiled": self.graphs_compiled, "calls": self.calls, "compiled_graph_calls": self.graph_calls,
                "every_call_ran_the_compiled_graph": self.graphs_compiled == 1 and self.graph_calls >= self.calls}
