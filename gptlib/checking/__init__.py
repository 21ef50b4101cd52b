"""Judging a learner's code by what it does, and naming the mistake: the machinery every exercise's checker uses.

    result      Result, the verdict a checker returns (passed, failed, not attempted yet, error), and its statuses
    running     checker(...) makes a check's body a Result; call(...) runs the learner's code on copies, guarded
    reading     a learner's answer read leniently as a count, a number, a tuple of numbers or a tensor
    mistakes    Mistake (a message with a stable id), close (the tolerance rule), name_mistake, named_mistakes (ids a check named)
    rounding    telling float rounding from a real difference, by a decision rounding cannot cross
    variants    hidden variants: every seed and hand-fixed point moved by a secret offset (shifted_seeds)
    sealed      concept questions' sealed records: verdicts held without their answers
    roles       which of a learner's tensors is which symbol of the lecture (every reading the shapes allow)
    components  a learner's nn.Module judged against gptlib's own component under each reading (the build track's)

What other layers may use: the names this package exports (below, `__all__`) and the public names of the
modules above. Nothing outside it imports a name of it that starts with an underscore
(tests/project/test_architecture.py). gptlib.exercises builds the exercises' checkers on all of it; adoption and
export read and prove a learner's GPT with `components`' run and tolerance; gptlib.assignment and the
course kit (gptlib_course: the assignment builder, the judge, the zygote) use the verdicts, the hidden
variants and the sealed records. It stands on torch and numpy alone: the references a check compares with
(gptlib's model, the analyses) come from the exercise that calls it.
"""

from . import components, roles, rounding, sealed
from .components import SIZES, TOL, same
from .mistakes import Mistake, close, name_mistake, named_mistakes, note, note_ids
from .reading import as_float, as_int, as_matrix, as_numbers
from .result import ERROR, FAILED, NOT_ATTEMPTED, PASSED, Result
from .running import LearnerRaised, NotAttempted, Wrong, call, checker, global_state_kept, not_attempted, raised_by_a_stub
from .variants import shifted_seeds, variant_choice, variant_points, variant_seed

__all__ = [
    "ERROR",
    "FAILED",
    "NOT_ATTEMPTED",
    "PASSED",
    "SIZES",
    "TOL",
    "LearnerRaised",
    "Mistake",
    "NotAttempted",
    "Result",
    "Wrong",
    "as_float",
    "as_int",
    "as_matrix",
    "as_numbers",
    "call",
    "checker",
    "close",
    "components",
    "global_state_kept",
    "name_mistake",
    "named_mistakes",
    "not_attempted",
    "note",
    "note_ids",
    "raised_by_a_stub",
    "roles",
    "rounding",
    "same",
    "sealed",
    "shifted_seeds",
    "variant_choice",
    "variant_points",
    "variant_seed",
]
