"""Checkpoints: save then load is bit-exact; bad files are refused before any weight changes."""

import pytest
import torch

from gptlib import GPT, GPTConfig
from gptlib.checkpoint import load_checkpoint, load_weights_into, save_checkpoint


def params_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_save_then_load_is_bit_exact(tmp_path, small_config, same_state):
    model = GPT(small_config)
    path = save_checkpoint(tmp_path / "m.pt", model, {"note": "hello", "val_loss": 1.5})
    loaded, payload = load_checkpoint(path)
    assert loaded.config == small_config and not loaded.training
    assert same_state(params_of(model), loaded)
    idx = torch.randint(65, (3, 16))
    assert torch.equal(model.eval()(idx), loaded(idx))
    assert payload["metadata"] == {"note": "hello", "val_loss": 1.5}
    assert not (tmp_path / "m.pt.part").exists()


def test_corrupted_and_truncated_files_are_rejected(tmp_path, small_config):
    good = save_checkpoint(tmp_path / "good.pt", GPT(small_config))
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a checkpoint" * 100)
    for bad in (truncated, garbage):
        with pytest.raises(ValueError, match=r"not a readable checkpoint \(corrupted, truncated"):
            load_checkpoint(bad)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "absent.pt")


def test_code_in_a_pickle_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "gptlib-checkpoint-1", "payload": GPTConfig()}, path)  # an arbitrary object
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(path)


def edited(tmp_path, config, edit):
    path = save_checkpoint(tmp_path / "x.pt", GPT(config))
    payload = torch.load(path, weights_only=True)
    edit(payload)
    torch.save(payload, path)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.pop("state_dict"), "lacks checkpoint keys"),
    (lambda p: p.update(format="other"), "format tag"),
    (lambda p: p["state_dict"].pop("E"), r"missing \['E'\]"),
    (lambda p: p["state_dict"].update(extra=torch.zeros(1)), r"unexpected \['extra'\]"),
    (lambda p: p["state_dict"].update(E=torch.zeros(65, 31)), "weight E has shape"),
    (lambda p: p["config"].update(H=3), "invalid config"),
    (lambda p: p.update(vocabulary="abc"), "vocabulary has 3 symbols"),
])
def test_wrong_contents_are_named(tmp_path, small_config, edit, message):
    with pytest.raises(ValueError, match=message):
        load_checkpoint(edited(tmp_path, small_config, edit))


def test_a_mismatch_never_half_loads(tmp_path, small_config, same_state):
    """Torch's own load_state_dict copies the matching weights before it reports a bad shape; ours copies none."""
    source = GPT(small_config)
    bad_state = params_of(source)
    bad_state["W_U"] = torch.zeros(32, 64)
    naive = GPT(small_config)
    with pytest.raises(RuntimeError):
        naive.load_state_dict(bad_state)
    assert torch.equal(naive.E, source.E)  # the wrong way: E was overwritten before the error

    path = edited(tmp_path, small_config, lambda p: p["state_dict"].update(W_U=torch.zeros(32, 64)))
    target = GPT(small_config)
    before = params_of(target)
    with pytest.raises(ValueError, match="W_U"):
        load_weights_into(target, path)
    assert same_state(before, target)


def test_loading_into_a_model_of_another_config_is_refused(tmp_path, small_config, same_state):
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config))
    other = GPT(small_config.replace(ln_eps=1e-6))  # same shapes, different config
    before = params_of(other)
    with pytest.raises(ValueError, match="differs from the model"):
        load_weights_into(other, path)
    assert same_state(before, other)
    same = GPT(small_config)
    load_weights_into(same, path)
    assert same_state(params_of(load_checkpoint(path)[0]), same)


def test_unreadable_file_message_never_suggests_unsafe_loading(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a checkpoint" * 100)
    with pytest.raises(ValueError) as caught:
        load_checkpoint(garbage)
    assert "weights_only" not in str(caught.value)  # torch's own hint would run arbitrary code
