"""torch.compile integration: narrow the Triton choices Inductor autotunes for `aten._grouped_mm` to a predicted top-k.

    import autoheur.inductor
    with autoheur.inductor.enable():          # or enable() / disable()
        fn = torch.compile(moe_block, mode="max-autotune")
        fn(x, w1, w2, offs)                   # torch.compile is lazy: it compiles and autotunes here, in the block

A function compiled lazily and first called after the block autotunes Inductor's whole list: the filter acts while
Inductor lowers a graph (a first call, a recompile), so keep those inside the scope, or enable() without `with`.

Inductor offers the ATen kernel plus its persistent Triton template over a fixed grid (144 configs, pruned by the
rows per group and shared memory) and compiles and benchmarks every one. `enable()` registers a preprocessing function
(`torch._inductor.select_algorithm.add_preprocessing_fn`, run before anything is compiled) that keeps the ATen choice
and the k template choices a model ranks best for the problem, and leaves the list whole when unsure: no model for
this GPU, a problem it cannot read, one outside the model's training range (by more than 2% of a feature's span
there: filter.RANGE_MARGIN), or k or fewer template choices. Under dynamic shapes (a recompile on a second row count)
it ranks at Inductor's size hints, among the choices a static shape of those sizes is offered. See choices.py for how
a choice is read and filter.py for the decision.

Versions: the hooks used (`add_preprocessing_fn`, `add_feedback_saver`, the `triton_grouped_mm_<i>` names and their
kwargs description) exist in torch 2.9 to 2.15, as read from those wheels. Tested: torch 2.13 on the CPU, on the
real choice lists of Inductor's lowering (tests/inductor), and torch 2.11 on an H100 (tests/inductor, and the MoE
block of benchmarks/inductor_block.py; BENCHMARKS.md). Dynamic shapes also call Inductor's own pruning,
`early_config_prune(g, m, itemsize, configs, named_args)`: so in torch 2.11 (an H200, stop 84) and 2.13 (the CPU);
a torch where it cannot be called so leaves a symbolic list whole.
"""

from autoheur.inductor.choices import grid_configs, inductor_problem, template_config
from autoheur.inductor.filter import ChoiceFilter, disable, enable

__all__ = ["ChoiceFilter", "disable", "enable", "grid_configs", "inductor_problem", "template_config"]
