"""The mirror of a submission's module (gptlib_course.remote_module), in one process: the judge's half
(judge.remote_call, remote_module.Link) talks to the submission's half (inside.zygote._call, ModuleServer) through the
bytes the pipe carries (pickle one way, torch.save read back with torch.load(weights_only=True) the other).
The build checkers judge a mirror as they judge the module itself; whatever the submission sends that the
protocol does not allow is refused with a reason. tests/course/test_grading.py grades notebook 09 through
the real sandbox."""

import pickle

import pytest
import torch
from torch import nn

from gptlib import exercises
from gptlib.checking import shifted_seeds
from gptlib.exercises import build_track
from gptlib.exercises.answers import build as S
from gptlib_course.inside import remote_module, zygote
from gptlib_course.inside.remote_module import ModuleServer
from gptlib_course.judge import RemoteFunction, SubmissionStopped, read_reply, remote_call
from gptlib_course.limits import Limits
from gptlib_course.remote_module import Link, RemoteModule
from tests.support import course_class


class InProcess:
    """judge.Submission's stand-in whose 'process' is this one: each request crosses as the pipe's bytes would."""

    def __init__(self, namespace: dict):
        self.namespace, self.server = namespace, ModuleServer()
        self.process, self.stops, self.limits, self.requests = True, [], Limits(), []
        self.modules = Link(self._forward)

    def _forward(self, link, kind, target, args):
        return remote_call(self, link, kind, target, args, 60, "in your module's forward")

    def stopped(self, reason: str) -> SubmissionStopped:
        self.stops.append(reason)
        return SubmissionStopped(reason)

    def ask(self, *request, seconds: float, doing: str):
        self.requests.append(request)
        sent = []

        class Pipe:
            send_bytes = sent.append

        zygote._call(Pipe, self.namespace, self.server, pickle.loads(pickle.dumps(request)))
        return read_reply(sent[0], doing)

    def function(self, name: str) -> RemoteFunction:
        return RemoteFunction(self, name, name, 60)


def _namespace(code: str) -> dict:
    namespace = {}
    exec(compile(code, "<submission>", "exec"), namespace)
    return namespace


CHECKS = ["check_layer_norm_module(LayerNorm)", "check_attention_head(AttentionHead)",
          "check_multi_head_attention(MultiHeadAttention)", "check_mlp(MLP)", "check_block(Block)", "check_gpt(GPT)",
          "check_init(init_weights, GPT)"]


@pytest.mark.parametrize("offset", [0, 4242])
@pytest.mark.parametrize("code", [course_class.CORRECT_09, course_class.BUILD_SOLUTIONS + course_class.TYPICAL_09],
                         ids=["reference", "typical mistakes"])
@pytest.mark.parametrize("check", CHECKS)
def test_a_checker_judges_the_mirror_as_the_module_itself(check, code, offset):
    """Verdict, message and details through the mirror equal the checker's on the classes in this process,
    on the public sizes and on a hidden variant's."""
    check = f"exercises.build_track.{check}"
    submission = InProcess(_namespace(code))
    names = [n for n in course_class.BUILD if f"{n})" in check or f"({n}," in check]
    namespace = {"exercises": exercises, **{n: submission.function(n) for n in names}}
    with shifted_seeds(offset):
        got = eval(check, namespace)
    expected = course_class.expected_result(code, check, offset)
    assert (got.status, got.message, got.details) == (expected.status, expected.message, expected.details)
    assert not submission.stops


def _mirror(cls, *sizes):
    submission = InProcess({"Cls": cls})
    return submission, submission.function("Cls")(*sizes)


def test_the_mirror_has_the_modules_structure_names_and_shared_parameters():
    class Tied(S.GPT):
        def __init__(self, *sizes):
            super().__init__(*sizes)
            self.head = nn.Linear(sizes[2], sizes[0], bias=False)
            self.head.weight = self.E  # one parameter, two places
            self.embedding = nn.Embedding(3, sizes[2])

    module = Tied(13, 8, 16, 2, 2, 64)
    _, mirror = _mirror(Tied, 13, 8, 16, 2, 2, 64)
    assert [(n, p.shape) for n, p in mirror.named_parameters()] == [(n, p.shape) for n, p in module.named_parameters()]
    assert [n for n, _ in mirror.named_modules()] == [n for n, _ in module.named_modules()]
    assert mirror.head.weight is mirror.E and isinstance(mirror.blocks, nn.ModuleList) and len(mirror.blocks) == 2
    assert isinstance(mirror.embedding, nn.Embedding) and isinstance(mirror, RemoteModule)


def test_only_what_changed_crosses_and_what_the_forward_writes_comes_back():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.w, self.calls = nn.Parameter(torch.zeros(4)), nn.Parameter(torch.zeros(1))

        def forward(self, x):
            with torch.no_grad():
                self.calls += 1  # a forward that writes a parameter: the checker sees it, as in the learner's kernel
            return x * self.w

    submission, mirror = _mirror(Counting)
    with torch.no_grad():
        mirror.w.fill_(2.0)
    assert torch.equal(mirror(torch.ones(4)), torch.full((4,), 2.0))
    assert torch.equal(mirror(torch.ones(4)), torch.full((4,), 2.0))
    first, second = (r[3]["updates"] for r in submission.requests[1:])
    assert list(first) == [0] and list(first[0]) == [0] and second == {}  # w once, then nothing
    assert mirror.calls.item() == 2


def test_a_mirror_of_an_ended_process_refuses_to_run():
    submission, mirror = _mirror(S.MLP, 16, 64)
    submission.modules = Link(submission._forward)  # the process was started again
    with pytest.raises(SubmissionStopped, match="has ended"):
        mirror(torch.zeros(1, 2, 16))


def _tree(**changes):
    """A true description of an MLP(4, 8), with `changes` made to it."""
    _, _, tree = ModuleServer().described(S.MLP(4, 8))
    tree.update(changes)
    return tree


FORGED = {
    "a value of another shape": lambda t: t["values"].__setitem__(0, torch.zeros(3)),
    "another dtype than declared": lambda t: t["values"].__setitem__(0, t["values"][0].double()),
    "a huge declared shape": lambda t: t["parameters"].__setitem__(0, ("float32", (2**40,), True)),
    "an unreadable dtype": lambda t: t["parameters"].__setitem__(0, ("complex64", (4, 8), True)),
    "a name with a dot": lambda t: t["nodes"].__setitem__(0, ("Module", [], [("W.1", 0)])),
    "an empty name": lambda t: t["nodes"].__setitem__(0, ("Module", [], [("", 0)])),
    "a name of nn.Module's": lambda t: t["nodes"].__setitem__(0, ("Module", [], [("forward", 0)])),
    "a slot out of range": lambda t: t["nodes"].__setitem__(0, ("Module", [], [("W_1", 9)])),
    "a child out of range": lambda t: t["nodes"].__setitem__(0, ("Module", [("x", 5)], [])),
    "a kind not mirrored": lambda t: t["nodes"].__setitem__(0, ("Linear", [], [])),
    "a list where a tuple goes": lambda t: t["nodes"].__setitem__(0, ["Module", [], []]),
    "a value that is no tensor": lambda t: t["values"].__setitem__(0, [0.0] * 32),
    "a missing value": lambda t: t["values"].pop(),
    "no nodes": lambda t: t.__setitem__("nodes", []),
}


@pytest.mark.parametrize("forgery", FORGED.values(), ids=FORGED.keys())
def test_a_forged_description_is_refused(forgery):
    tree = _tree()
    forgery(tree)
    with pytest.raises(ValueError):
        Link(None).mirror(0, tree)


def test_forged_changes_and_handles_are_refused():
    link = Link(None)
    link.mirror(0, _tree())
    for reply in [("return", 1, {1: {0: torch.zeros(4, 8)}}),  # a module not asked about
                  ("return", 1, {0: {"0": torch.zeros(4, 8)}}),  # a slot that is no index
                  ("return", 1, {0: {0: torch.zeros(8, 4)}}),  # another shape than W_1's (4, 8)
                  ("return", 1),  # no changes
                  ("module", (0, _tree()), {})]:  # a handle already mirrored
        with pytest.raises(ValueError):
            link.received(reply, [0])
    assert link.received(("return", 1, {0: {0: torch.ones(4, 8)}}), [0]) == ("return", 1)
    assert torch.equal(link.mirrors[0].parameters[0].detach(), torch.ones(4, 8))


def test_the_submissions_side_refuses_what_it_will_not_describe():
    class Complex(nn.Module):
        def __init__(self):
            super().__init__()
            self.z = nn.Parameter(torch.zeros(2, dtype=torch.complex64))

    with pytest.raises(ValueError, match="complex64"):
        ModuleServer().described(Complex())
    big = nn.Module()
    big.w = nn.Parameter(torch.zeros(remote_module.TENSOR_ELEMENTS + 1), requires_grad=False)
    with pytest.raises(ValueError, match="entries"):
        ModuleServer().described(big)


def test_build_checkers_run_unchanged_on_a_module_given_as_a_mirror():
    """The checkers' other entry, a module already built: a mirror is one (an nn.Module)."""
    _, mirror = _mirror(S.GPT, 13, 8, 16, 2, 2, 64)
    assert build_track.check_gpt(mirror, V=13, T_max=8, d=16, H=2, L=2).passed
