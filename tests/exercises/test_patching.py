"""exercises.check_head_patching: a correct patching passes however it is written; each typical
mistake, written as a learner would write it, is named; a copied table fails."""

import torch

from gptlib.analysis.decomposition import head_label, stream_writes
from gptlib.analysis.patching import logits_from_writes
from gptlib.checking import FAILED
from gptlib.exercises.patching import TOLERANCE, check_head_patching


def log_probs(model, prompts, layer, head, into="corrupted", direct_only=False):
    """(clean, corrupted, patched) log-probabilities: the clean run's write of one head put into the other run."""
    label = head_label(layer, head)
    clean, corrupted = stream_writes(model, prompts.clean), stream_writes(model, prompts.corrupted)
    source, target = (clean, prompts.corrupted) if into == "corrupted" else (corrupted, prompts.clean)
    patched = stream_writes(model, target, replace={label: source[label]})
    return tuple(prompts.log_prob(logits_from_writes(model, w)) for w in (clean, corrupted, patched))


def correct(model, prompts, layer, head):
    clean, corrupted, patched = log_probs(model, prompts, layer, head)
    return (patched - corrupted) / (clean - corrupted)


def correct_with_hooks(model, prompts, layer, head):
    """The same measurement another way: forward hooks on the model's own blocks, no gptlib.analysis.decomposition."""
    attn = model.blocks[layer].attn
    saved = {}

    def run(ids, write):
        def hook(module, inputs, output):
            X = inputs[0]  # LN_1(X^(l)), (B, T, d)
            q, k, v = module.qkv(X)
            A = module.attention_matrices(q, k)  # (B, H, T, T)
            own = (A[:, head] @ v[:, head]) @ module.W_O_head(head)  # this head's write, (B, T, d)
            saved.setdefault(write, own)
            return output - own + saved["clean"] if write == "patch" else output
        handle = attn.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return prompts.log_prob(model(ids))
        finally:
            handle.remove()

    clean = run(prompts.clean, "clean")
    corrupted = run(prompts.corrupted, "corrupted")
    return (run(prompts.corrupted, "patch") - corrupted) / (clean - corrupted)


def test_a_correct_patching_passes_written_either_way():
    assert check_head_patching(correct)
    assert check_head_patching(correct_with_hooks)


def test_each_typical_mistake_is_named():
    def unnormalised(model, prompts, layer, head):
        clean, corrupted, patched = log_probs(model, prompts, layer, head)
        return patched - corrupted

    def noising(model, prompts, layer, head):
        clean, corrupted, noised = log_probs(model, prompts, layer, head, into="clean")
        return (clean - noised) / (clean - corrupted)

    for fn, words in [(unnormalised, "divide it by the gap"), (noising, "noising"),
                      (lambda *args: 1 - correct(*args), "still missing")]:
        result = check_head_patching(fn)
        assert not result and words in result.message, result.message


def test_a_table_copied_from_one_corruption_fails():
    table = {}

    def copied(model, prompts, layer, head):
        table.setdefault((layer, head), correct(model, prompts, layer, head))  # the first corruption's numbers
        return table[(layer, head)]

    result = check_head_patching(copied)
    assert not result and "corruption seed 1" in result.message, result.message


def test_the_stub_reads_not_attempted():
    def restored_fraction(model, prompts, layer, head):
        raise NotImplementedError

    assert check_head_patching(restored_fraction).status == "not attempted yet"


def test_a_fraction_off_by_twice_the_tolerance_at_one_head_is_refused_and_half_of_it_passes():
    # Issue 42: over 200 hidden variants (corruption seeds 0..200) the hooks above differ from gptlib's
    # patching by at most 2.8e-7 on this model, 3,600 times below TOLERANCE.
    def off(size):
        def restored_fraction(model, prompts, layer, head):
            return correct(model, prompts, layer, head) + (size * TOLERANCE if (layer, head) == (1, 0) else 0.0)
        return restored_fraction

    r = check_head_patching(off(2.0))
    assert r.status == FAILED and "head 0 of layer 1" in r.message, r
    assert check_head_patching(off(0.5)).passed
