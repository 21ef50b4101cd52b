"""Checkers for the eight exercises of Lecture 5, plus a check of a learner's own GPT.

Each checker takes the learner's own code (a function, a number or a model), runs it against
gptlib's reference and independent measurements, and returns a `Result`: `.passed`, a message
that names the typical mistake it recognised, details; it prints as a short verdict in a
notebook and never raises on a learner's mistake (a stub raising NotImplementedError reads
"not attempted yet"). `hint(n, level)` gives progressive hints, `show_solution(n)` the
reference solution (gptlib/exercises/answers/: self-study installs only, a class release has none).

    Exercise 1 ★  check_parameter_count(count), check_parameter_table(rows)      counting.py
    Exercise 2 ★  check_causality(model), check_dependency_map(fn)              causality.py
    Exercise 3    check_factor_pair_dimension(fn)                               attention.py
    Exercise 4    check_layer_norm(project, rescale), check_weight_decay(fn)    layernorm.py
    Exercise 5    check_tied_count(count)                                       counting.py
    Exercise 6    check_head_circuits(fn), check_rank_bounds(fn)                attention.py
    Exercise 7    check_post_norm_jacobian(fn), check_post_norm_statement(x)    jacobians.py
    Exercise 8    check_training_flops(fn), check_attention_takeover(fn)        cost.py
    questions     check_concept(id, answer), concept_answer(id)                 concepts.py, answers/concepts.py
    your own GPT  check_own_model(model, V=..., T_max=..., d=..., L=...)        own_model.py
    notebook 10   check_head_patching(fn): activation patching, head by head     patching.py
    build track   one checker per component of a GPT you write (notebook 09)   build_track/
    progress()    which of the above have passed in this kernel                 progress.py
"""

from ..checking import Result
from . import build_track
from .attention import check_factor_pair_dimension, check_head_circuits, check_rank_bounds
from .causality import check_causality, check_dependency_map
from .concepts import check_concept, concept_answer
from .cost import check_attention_takeover, check_training_flops
from .counting import check_parameter_count, check_parameter_table, check_tied_count
from .hints import hint, show_solution
from .jacobians import check_post_norm_jacobian, check_post_norm_statement, statements
from .layernorm import check_layer_norm, check_weight_decay
from .own_model import check_own_model
from .patching import check_head_patching
from .progress import progress

__all__ = [
    "Result",
    "check_attention_takeover",
    "check_causality",
    "check_concept",
    "check_dependency_map",
    "check_factor_pair_dimension",
    "check_head_circuits",
    "check_head_patching",
    "check_layer_norm",
    "check_own_model",
    "check_parameter_count",
    "check_parameter_table",
    "check_post_norm_jacobian",
    "check_post_norm_statement",
    "check_rank_bounds",
    "check_tied_count",
    "check_training_flops",
    "check_weight_decay",
    "build_track",
    "concept_answer",
    "hint",
    "progress",
    "show_solution",
    "statements",
]
