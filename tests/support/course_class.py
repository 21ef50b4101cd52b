"""A synthetic class for the course kit's tests: submissions made from the released student notebooks.

A submission puts one block of code in place of the notebook's answer cells (the first answer
cell gets the code, the others are emptied, as a student who wrote everything in one place).
correct() answers with gptlib's reference solutions, typical() with one typical mistake per answer
(code() adds the concept questions' answers: letters read from the checkers, formulas for the numbers);
the hostile submissions (for notebook 05 only, whose checkers are fast) crash, loop, delete their
cells, flood the output, import what is missing, ask for 8 GiB, snoop on the grader, forge the checker,
answer from a table of the public test's points, type the course configuration's numbers (constant: Question
5.3's count too),
raise the hidden configuration as their error (leaky), answer right in other types (typed), look for
other processes, signal their parents, leave a daemon that kills whatever it can, fork without end,
look for gptlib's answers, or answer with values that lie (confined()). Notebook 09's build track
has its own hostile modules (hostile_modules()): a forward that raises, loops, returns another shape, no
tensor or a huge one, a constructor that kills its process, a module whose parameters cannot be read.
What each deserves is not written here: the tests ask gptlib's checker in this process
(expected_result) and compare.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from pathlib import Path

import torch

from gptlib import exercises
from gptlib.assignment import cases
from gptlib.checking import shifted_seeds
from gptlib.config import COURSE_CONFIG
from gptlib.exercises.answers import build as _build_solutions
from gptlib.exercises.answers import concepts as _concepts
from gptlib.exercises.answers import solutions as _solutions
from gptlib_course import sandbox
from gptlib_course.questions import ROLE_KEY

# The reference solutions as a student would type them: their source, run in the notebook into a
# namespace `solutions` (grading hides gptlib/exercises/answers/ from submissions: importing it fails there).
SOLUTIONS = ("import types\nsolutions = types.ModuleType('solutions')\n"
             f"exec({Path(_solutions.__file__).read_text()!r}, solutions.__dict__)\n")


# The build track's reference classes (notebook 09), typed the same way into a namespace `build_solutions`.
BUILD_SOLUTIONS = ("import types\nbuild_solutions = types.ModuleType('build_solutions')\n"
                   f"exec({Path(_build_solutions.__file__).read_text()!r}, build_solutions.__dict__)\n")
BUILD = ("LayerNorm", "AttentionHead", "MultiHeadAttention", "MLP", "Block", "GPT", "init_weights")
CORRECT_09 = BUILD_SOLUTIONS + "\n".join(f"{name} = build_solutions.{name}" for name in BUILD)


def solved(*names: str) -> str:
    """Code defining the reference solutions `names` ("rows as table") under their own or the given name."""
    pairs = [(n.split(" as ")[0], n.split(" as ")[-1]) for n in names]
    return SOLUTIONS + "\n".join(f"{alias} = solutions.{name}" for name, alias in pairs)


def right_letter(check, letters: str = "abcdef") -> str:
    """The choice a checker accepts, found by asking it (no answer typed here)."""
    return next(letter for letter in letters if check(letter))


# Each number question's answer as a student writes it: a formula in the sizes the question states, in its
# order (the checker compares it with the answer measured at those sizes, and in a hidden case at others).
FORMULAS = {
    "1.5": "lambda d, H, T: T",
    "2.3": "lambda d, d_ff: 3 * d * d_ff",
    "3.3": "lambda T, L: T * (16 - 1)",  # d = 16 is stated and fixed (logit_jacobian_question)
    "4.3": "lambda d, k: d - k",
    "5.3": "lambda d: 12 * d**2 + 2 * d",
    "6.3": "lambda T, w, L: T * (T - 1) // 2 + sum(T - gap for gap in range(L * (w - 1) + 1, T))",
    "7.3": "lambda d, H: d + d // H + 4 * d",
    "10.3": "lambda H, ell: 1 + ell * (H + 1)",
}


def concept_lines(asked: list, wrong: bool) -> str:
    """`answer_concept_N_M = ...` for every concept question asked (questions.Question), right or wrong: a
    choice's letter, a number question's formula (FORMULAS; one more than it when wrong)."""
    lines = []
    for question in asked:
        call = ast.parse(question.check, mode="eval").body
        if call.func.attr != "check_concept":
            continue
        q = call.args[0].value
        if q in FORMULAS:
            answer = f"lambda *sizes: ({FORMULAS[q]})(*sizes) + 1" if wrong else FORMULAS[q]
        else:
            answer = repr(right_letter(lambda x, q=q: bool(exercises.check_concept(q, x)) != wrong))
        lines.append(f"answer_{question.name} = {answer}")
    return "\n".join(lines)


def code(notebook: str, asked: list, wrong: bool) -> str:
    """A whole submission's answers for a notebook: its functions (correct() or typical()) and its concept answers."""
    functions = (typical() if wrong else correct()).get(notebook, "")
    return "\n".join(part for part in (functions, concept_lines(asked, wrong)) if part)


def correct() -> dict[str, str]:
    statement = right_letter(exercises.check_post_norm_statement)
    return {
        "01_multi_head_attention": solved('factor_pair_dimension', 'head_circuits', 'rank_bounds'),
        "03_residual_stream_and_prenorm": (
            solved("post_norm_jacobian") + f"\npost_norm_statement = {statement!r}"),
        "04_layernorm_geometry": solved('project', 'rescale', 'weight_decay_prediction as predict'),
        "05_gpt_and_parameter_count": solved('count', 'rows as table', 'tied_count'),
        "06_causality": solved('dependency_map'),
        "07_computational_cost": solved('flops_per_token', 'takeover_T'),
        "09_build_your_own_gpt": CORRECT_09,
    }


def typical() -> dict[str, str]:
    """Each answer wrong the way learners get it wrong (which mistake the checker names is its business)."""
    statement = right_letter(lambda x: not exercises.check_post_norm_statement(x))
    return {
        "01_multi_head_attention": (
            SOLUTIONS +
            ""
            "def head_circuits(attn, h):\n    W_QK, W_OV = solutions.head_circuits(attn, h)\n    return W_QK, W_OV.T\n"
            "def rank_bounds(d, H, T):\n    return d, d, T\n"
            "def factor_pair_dimension(d, d_head):\n    return d * d_head"),
        "03_residual_stream_and_prenorm": (
            SOLUTIONS +
            ""
            "def post_norm_jacobian(block, X):\n    return solutions.post_norm_jacobian(block, X).T\n"
            f"post_norm_statement = {statement!r}"),
        "04_layernorm_geometry": (
            "import torch\n"
            "def project(u):\n    return u - u.mean()\n"
            "def rescale(v, eps):\n    return v / torch.sqrt(v.pow(2).sum(-1, keepdim=True) / (v.shape[-1] - 1) + eps)\n"
            "def predict(c):\n    return 1 / c, 1 / c"),
        "05_gpt_and_parameter_count": (
            SOLUTIONS +
            ""
            "def count(c):\n    return solutions.count(c) + 3 * c.d * c.L\n"
            "def table(c):\n    rows = solutions.rows(c)\n    return rows[:4] + [rows[4] - 2 * c.d]\n"
            "def tied_count(c):\n    return solutions.count(c.replace(tie_weights=False))"),
        "06_causality": (
            SOLUTIONS +
            ""
            "def dependency_map(model, idx):\n    return solutions.dependency_map(model, idx).T"),
        "07_computational_cost": (
            SOLUTIONS +
            ""
            "def flops_per_token(config, T):\n    return solutions.flops_per_token(config, T) // 3\n"
            "def takeover_T(config):\n    return 6 * config.d"),
        "09_build_your_own_gpt": BUILD_SOLUTIONS + TYPICAL_09,
    }


TYPICAL_09 = """import torch
S = build_solutions


class LayerNorm(S.LayerNorm):  # the unbiased variance
    def forward(self, u):
        return self.gamma * (u - u.mean(-1, keepdim=True)) / torch.sqrt(u.var(-1, keepdim=True) + self.eps) + self.beta


class AttentionHead(S.AttentionHead):  # no 1/sqrt(d_head)
    def forward(self, X):
        q, k, v = X @ self.W_Q, X @ self.W_K, X @ self.W_V
        T = X.shape[1]
        return (q @ k.transpose(-2, -1)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf')).softmax(-1) @ v


class MultiHeadAttention(S.MultiHeadAttention):  # no b_O
    def forward(self, X):
        return torch.cat([head(X) for head in self.heads], dim=-1) @ self.W_O


class MLP(S.MLP):  # ReLU
    def forward(self, X):
        return torch.relu(X @ self.W_1 + self.b_1) @ self.W_2 + self.b_2


class Block(S.Block):  # post-norm
    def forward(self, X):
        Y = self.ln_1(X + self.attn(X))
        return self.ln_2(Y + self.mlp(Y))


class GPT(S.GPT):  # P not added
    def forward(self, idx):
        X = self.E[idx]
        for block in self.blocks:
            X = block(X)
        return self.ln_f(X) @ self.W_U


def init_weights(model):  # W_O and W_2 not scaled
    S.init_weights(model)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_O.normal_(0.0, 0.02)
            block.mlp.W_2.normal_(0.0, 0.02)
    return model
"""


def hostile_modules() -> dict[str, str]:
    """Code added to notebook 09's correct answers, each spoiling one step in a way a checker cannot use or the
    grader must stop: the step scores 0 with a reason, every other step its points."""
    return {
        "raises": "class MLP(build_solutions.MLP):\n    def forward(self, X):\n        raise ValueError('no MLP today')",
        "loops": "class LayerNorm(build_solutions.LayerNorm):\n    def forward(self, u):\n        while True:\n"
                 "            pass",
        "reshaped": "class AttentionHead(build_solutions.AttentionHead):\n    def forward(self, X):\n"
                    "        return super().forward(X)[:, :-1]",
        "untensored": "class MLP(build_solutions.MLP):\n    def forward(self, X):\n        return 'an MLP'",
        "huge": "import torch\nclass LayerNorm(build_solutions.LayerNorm):\n    def forward(self, u):\n"
                "        return torch.zeros(2**24)  # 64 MiB",
        "killer": "import os, signal\nclass MultiHeadAttention(build_solutions.MultiHeadAttention):\n"
                  "    def __init__(self, d, H):\n        os.kill(os.getpid(), signal.SIGKILL)",
        "unreadable": "import torch\nfrom torch import nn\nclass MLP(build_solutions.MLP):\n"
                      "    def named_parameters(self, *args, **kwargs):\n"
                      "        yield 'W_1', nn.Parameter(torch.zeros(3, dtype=torch.complex64))\n",
        "liar": LIAR,
    }


# A submission that rewrites its own process's description of every module (inside.remote_module.ModuleServer, found
# through the garbage collector): its first parameter declared of shape (3,), whatever its value holds.
LIAR = """import gc, types
_server = next(m for m in gc.get_objects()
               if isinstance(m, types.ModuleType) and m.__name__ == 'gptlib_course.inside.remote_module')
_described = _server.ModuleServer.described


def _lying(self, module):
    kind, handle, tree = _described(self, module)
    tree['parameters'][0] = ('float32', (3,), True)
    return kind, handle, tree


_server.ModuleServer.described = _lying
"""


CORRECT_05 = solved('count', 'rows as table', 'tied_count')


def hostile(correct_05: str, hidden_test: str, other_student: str, port: int, memorised: dict[str, int]) -> dict[str, str | None]:
    """Code of the hostile submissions of notebook 05 (None: keep the released stubs), each the
    correct answers `correct_05` with something added. The snoop's count is right only if it can
    read neither the hidden test nor another student's notebook, reach no socket on 127.0.0.1 and
    write no file of gptlib or import its reference solutions; the forger patches the checker and answers 0."""
    snoop = (
        SOLUTIONS + "import socket\nimport gptlib\n"
        "def _isolated():\n"
        f"    for path in ({hidden_test!r}, {other_student!r}):\n"
        "        try:\n            open(path).read()\n            return False\n        except OSError:\n            pass\n"
        "    try:\n        from gptlib.exercises.answers import solutions as reference  # noqa: F401\n        return False\n"
        "    except ImportError:\n        pass\n"
        f"    try:\n        socket.create_connection(('127.0.0.1', {port}), timeout=2)\n        return False\n"
        "    except OSError:\n        pass\n"
        "    try:\n        open(gptlib.__file__, 'a').close()\n        return False\n"
        "    except OSError:\n        return True\n"
        "ISOLATED = _isolated()\n"
        "def count(c):\n    return solutions.count(c) if ISOLATED else -1")
    forger = (
        "from gptlib import exercises\nfrom gptlib.checking import result\n"
        "result.Result.__bool__ = lambda self: True\n"
        "result.Result.passed = property(lambda self: True)\n"
        "exercises.check_parameter_count = lambda *args, **kwargs: True\n"
        "def count(c):\n    return 0\n"
        "def tied_count(c):\n    return 0")
    added = {
        "crash": "import ctypes\nctypes.string_at(0)  # segmentation fault",
        "loop": "def tied_count(c):\n    while True:\n        pass",
        "flood": SOLUTIONS +
            ""
                 "def count(c):\n    print('x' * 3_000_000)\n    return solutions.count(c)",
        "hog": SOLUTIONS + "import torch\n"
               "def count(c):\n    return solutions.count(c) + int(torch.ones(2**31).sum())  # 8 GiB",
        "snoop": snoop,
        "forger": forger,
        "memoriser": f"TABLE = {memorised!r}\ndef count(c):\n    return TABLE.get(repr(c), 0)",
        "constant": (f"count = {_solutions.count(COURSE_CONFIG)}\ntable = {_solutions.rows(COURSE_CONFIG)}\n"
                     f"tied_count = {_solutions.tied_count(COURSE_CONFIG.replace(tie_weights=True))}\n"
                     f"answer_concept_5_3 = {_concepts.QUESTIONS['5.3'].answer()}"),
        "leaky": "def count(c):\n    raise ValueError(repr(c))\ndef tied_count(c):\n    raise type(repr(c), (Exception,), {})()",
        "typed": ("import collections, fractions\nimport numpy as np\n"
                  "Rows = collections.namedtuple('Rows', 'embeddings attention mlps norms final')\n"
                  "def count(c):\n    return fractions.Fraction(solutions.count(c), 1)\n"
                  "def table(c):\n    return Rows(*solutions.rows(c))\n"
                  "def tied_count(c):\n    return np.int64(solutions.tied_count(c))"),
    }
    return {"stub": None, "noimport": "import a_module_nobody_has\n" + correct_05,
            **{student: correct_05 + "\n" + code for student, code in {**added, **confined()}.items()}}


def confined() -> dict[str, str]:
    """Code added to notebook 05's correct answers by the submissions that test the sandbox. Each
    count(c) is right only if every attempt failed (the first four): the process snoop sees no
    process but its zygote (PID 1) and its own, and cannot read the zygote's memory or environment;
    the signaller's signals to its parent, to PID 1 and to every process it may signal change nothing;
    the fork bomb stops before 64 processes; the writer can write in /tmp only. The daemon (double
    fork, setsid) kills every process it can, every 20 ms, for ever: it ends its own notebook (zero),
    and the students graded after it in the same sandbox must not notice. The peeker finds gptlib's
    reference answers neither importable nor readable (an empty folder where they live), nor any module
    or file of the grading kit (gptlib_course: the judge's code), even with the kit's folder on sys.path. The liars answer with an
    IntEnum holding the right counts (read as those ints: full points) and an int subclass whose
    == always holds but whose value is wrong (read as its value: zero)."""
    procsnoop = (
        "import os\n"
        "def _alone():\n"
        "    seen = {int(p) for p in os.listdir('/proc') if p.isdigit()}\n"
        "    if seen - {1, os.getpid()}:\n        return False\n"
        "    for path in ('/proc/1/mem', '/proc/1/environ', '/etc/shadow', '/etc/passwd'):\n"
        "        try:\n            open(path, 'rb').read(1)\n            return False\n"
        "        except OSError:\n            pass\n"
        "    return os.getuid() != 0\n"
        "ALONE = _alone()\n"
        "def count(c, _count=count):\n    return _count(c) if ALONE else -1")
    signaller = (
        "import os, signal\n"
        "for pid, sig in ((os.getppid(), signal.SIGKILL), (1, signal.SIGKILL), (1, signal.SIGTERM), (1, signal.SIGINT),\n"
        "                 (-1, signal.SIGKILL)):\n"
        "    try:\n        os.kill(pid, sig)\n    except OSError:\n        pass")
    bomb = (
        "import os, time\n"
        "FORKED = 0\n"
        "try:\n"
        "    for _ in range(100_000):\n"
        "        if os.fork() == 0:\n            time.sleep(3600)\n            os._exit(0)\n"
        "        FORKED += 1\n"
        "except OSError:\n    pass\n"
        "def count(c, _count=count):\n    return _count(c) if FORKED < 64 else -1")
    writer = (
        "import os\n"
        "import gptlib\n"
        "def _writes(path):\n"
        "    try:\n        open(path, 'w').close()\n        return True\n    except OSError:\n        return False\n"
        "HOME_ONLY = [_writes(p) for p in ('/tmp/mine', '/outside', '/usr/lib/mine', '/dev/mine',\n"
        "             os.path.join(os.path.dirname(gptlib.__file__), 'mine'))] == [True, False, False, False, False]\n"
        "def count(c, _count=count):\n    return _count(c) if HOME_ONLY else -1")
    daemon = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        while True:\n"
        "            try:\n                os.kill(-1, 9)\n            except OSError:\n                pass\n"
        "            time.sleep(0.02)\n"
        "    os._exit(0)\n"
        "time.sleep(1)")
    peeker = (
        "import importlib, os, sys\n"
        "import gptlib\n"
        "def _hidden():\n"
        "    folder = os.path.join(os.path.dirname(gptlib.__file__), 'exercises', 'answers')\n"
        "    for name in ('gptlib.exercises.answers.solutions', 'gptlib.exercises.answers.concepts'):\n"
        "        try:\n            importlib.import_module(name)\n            return False\n"
        "        except ImportError:\n            pass\n"
        "    try:\n        return os.listdir(folder) == []\n    except OSError:\n        return True\n"
        f"KIT = {str(sandbox.KIT)!r}\n"
        "def _no_kit():\n"
        "    sys.path.insert(0, os.path.dirname(KIT))\n"
        "    for name in ('gptlib_course.judge', 'gptlib_course.assign', 'gptlib_course.sandbox'):\n"
        "        try:\n            importlib.import_module(name)\n            return False\n"
        "        except ImportError:\n            pass\n"
        "    return not os.path.isdir(KIT) or os.listdir(KIT) == []\n"
        "HIDDEN = _hidden() and _no_kit()\n"
        "def count(c, _count=count):\n    return _count(c) if HIDDEN else -1")
    liar_enum = (
        "import enum\n"
        "def count(c, _count=count):\n    return enum.IntEnum('Count', {'n': _count(c)}).n\n"
        "def tied_count(c, _tied=tied_count):\n    return enum.IntEnum('Count', {'n': _tied(c)}).n")
    liar_eq = (
        "class Liar(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    __hash__ = int.__hash__\n"
        "def count(c, _count=count):\n    return Liar(_count(c) + 1)")
    return {"procsnoop": procsnoop, "signaller": signaller, "bomb": bomb, "writer": writer, "daemon": daemon,
            "peeker": peeker, "intenum": liar_enum, "liar": liar_eq}


def submission(released: dict, code: str | None, drop_answers: bool = False) -> dict:
    """The released notebook with `code` in its first answer cell and the other answer cells emptied
    (code None: the stubs kept). drop_answers: the answer cells deleted, `code` added as a new cell."""
    notebook = copy.deepcopy(released)
    answers = [c for c in notebook["cells"] if c.get("metadata", {}).get(ROLE_KEY, {}).get("role") == "answer"]
    if code is None:
        return notebook
    if drop_answers:
        notebook["cells"] = [c for c in notebook["cells"] if c not in answers]
        notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": code, "outputs": [], "execution_count": None})
        return notebook
    for i, cell in enumerate(answers):
        cell["source"] = code if i == 0 else ""
    return notebook


def expected_result(code: str, check: str, seed_offset: int = 0):
    """What gptlib's checker says, in this process, for the answers `code` defines."""
    namespace: dict = {}
    exec(compile(code, "<submission>", "exec"), namespace)
    namespace["exercises"] = exercises
    with shifted_seeds(seed_offset):
        return eval(check, namespace)


def calls(check: str, code: str, name: str, offset: int) -> list[tuple]:
    """The arguments with which the checker calls the answer `name` that `code` defines, under a seed offset."""
    namespace = {}
    exec(code, namespace)
    answer, seen = namespace[name], []

    def recording(*args):
        seen.append(args)
        return answer(*args)

    recording.__name__ = answer.__name__
    with shifted_seeds(offset):
        eval(check, {**namespace, name: recording, "exercises": exercises})
    return seen


def fingerprint(value) -> str:
    """What an argument holds: a tensor's values, a module's weights (repr shows neither)."""
    if isinstance(value, torch.Tensor):
        return hashlib.sha256(value.detach().contiguous().numpy().tobytes()).hexdigest()
    if isinstance(value, torch.nn.Module):
        return repr([fingerprint(t) for t in value.state_dict().values()])
    if isinstance(value, (tuple, list)):
        return repr([fingerprint(v) for v in value])
    return repr(value)


def hidden_offset(test: cases.TestFile) -> int:
    return next(c for c in test.cases if c.hidden)(lambda check, seed_offset=0, functions=(): seed_offset)


def hidden_variant_moves(out, correct: dict, notebook: str, question: str) -> bool:
    """Whether the hidden offset changes what the checker calls the answers with (values, weights)."""
    test = cases.load(out / "autograder" / notebook / "tests" / f"{question}.py")
    answers = [a.id for a in ast.walk(ast.parse(test.check)) if isinstance(a, ast.Name) and a.id != "exercises"]
    offset = hidden_offset(test)
    code = correct[notebook]
    return all(fingerprint(calls(test.check, code, a, 0)) != fingerprint(calls(test.check, code, a, offset)) for a in answers)
