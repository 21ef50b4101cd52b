"""gptlib: the GPT of Lecture 5 as small, readable PyTorch, with the checks the notebooks run.

Importing gptlib loads torch only; plotting and widgets live in gptlib.viz and load on demand.
"""

from . import printing
from .analysis.cache import Cache, run_with_cache
from .analysis.counting import component_table, format_table, measured_table, theorem_5_2
from .config import COURSE_CONFIG, GPTConfig
from .data import VOCABULARY, decode, encode
from .model import GPT
from .reproducibility import make_deterministic

__all__ = [
    "COURSE_CONFIG",
    "GPT",
    "GPTConfig",
    "Cache",
    "VOCABULARY",
    "adopt",
    "component_table",
    "decode",
    "encode",
    "format_table",
    "make_deterministic",
    "measured_table",
    "printing",
    "run_with_cache",
    "theorem_5_2",
]


def adopt(model, config: GPTConfig, seed: int = 0) -> GPT:
    """A learner's GPT read into gptlib's GPT, its logits proven equal (gptlib.adoption.adopt). Imported when
    called: adoption reads models with the build checkers, which `import gptlib` need not load."""
    from .adoption import adopt as adopt_model

    return adopt_model(model, config, seed)
