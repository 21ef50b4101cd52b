"""Checkpoints: save then load is bit-exact; bad files are refused before any weight changes."""

import functools
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from gptlib import GPT, VOCABULARY, GPTConfig
from gptlib.checkpoint import MAX_NESTING, load_checkpoint, load_weights_into, read_checkpoint, save_checkpoint


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
    assert sorted(tmp_path.iterdir()) == [path]  # no .part left beside it


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
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 30_000))  # pickle recurses: room for a file nested 10,000 deep
    try:
        torch.save(payload, path)
    finally:
        sys.setrecursionlimit(limit)
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.pop("state_dict"), "lacks checkpoint keys"),
    (lambda p: p.update(format="other"), "format tag"),
    (lambda p: p["state_dict"].pop("E"), r"missing \['E'\]"),
    (lambda p: p["state_dict"].update(extra=torch.zeros(1)), r"unexpected \['extra'\]"),
    (lambda p: p["state_dict"].update(E=torch.zeros(65, 31)), "weight E has shape"),
    (lambda p: p["config"].update(H=3), "invalid config"),
    (lambda p: p.update(vocabulary="abc"), r"its vocabulary \(3 symbols\) is not the course's"),
    (lambda p: p.update(vocabulary=VOCABULARY[::-1]), r"its vocabulary \(65 symbols\) is not the course's"),
    (lambda p: p.update(vocabulary=65), r"its vocabulary \(of type int\) is not the course's"),
    (lambda p: p.update(state_dict=[1, 2]), "state_dict must be a dict, got list"),
    (lambda p: p.update(state_dict=None), "state_dict must be a dict, got NoneType"),
    (lambda p: p.update(config=[65, 16]), "config must be a dict, got list"),
    (lambda p: p.update(metadata=["note"]), "metadata must be a dict, got list"),
    (lambda p: p.update(training=3), "training must be a dict, got int"),
    (lambda p: p["config"].update(d="32"), "invalid config: d must be an integer >= 1, got '32'"),
    (lambda p: p["config"].update(causal="False"), "invalid config: causal must be True or False, got 'False'"),
    (lambda p: p["config"].update(surprise=1), "invalid config: .*unexpected keyword argument 'surprise'"),
    (lambda p: p["config"].update(V=64), "invalid config|V=64"),
    (lambda p: p["state_dict"].update(E=p["state_dict"]["E"].double()),
     "weight E has dtype torch.float64, the model needs torch.float32"),
    (lambda p: p["state_dict"]["P"].__setitem__((0, 0), float("nan")), "weight P holds 1 non-finite values"),
    (lambda p: p["state_dict"]["W_U"].fill_(float("inf")), "weight W_U holds 2080 non-finite values"),
    (lambda p: p["state_dict"].update(W_U=torch.zeros(1).expand(32, 65)), "weight W_U is a view of other data"),
    (lambda p: p["state_dict"].update(W_U=p["state_dict"]["E"].T), "weight W_U is a view of other data"),
    (lambda p: p["state_dict"].update({7: torch.zeros(1)}), "weight names must be strings"),
    (lambda p: p["state_dict"].update(E="weights"), "weight E is a str, not a tensor"),
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
    with pytest.raises(ValueError, match=r"another model: its config differs in ln_eps 1e-05 \(file\) vs 1e-06"):
        load_weights_into(other, path)
    assert same_state(before, other)
    double = GPT(small_config).double()  # the file's config, but not its float32 weights
    before = params_of(double)
    with pytest.raises(ValueError, match="weight E has dtype torch.float32, the model needs torch.float64"):
        load_weights_into(double, path)
    assert same_state(before, double)
    same = GPT(small_config)
    load_weights_into(same, path)
    assert same_state(params_of(load_checkpoint(path)[0]), same)


def test_unreadable_file_message_never_suggests_unsafe_loading(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a checkpoint" * 100)
    with pytest.raises(ValueError) as caught:
        load_checkpoint(garbage)
    assert "weights_only" not in str(caught.value)  # torch's own hint would run arbitrary code


@pytest.mark.slow  # a fresh interpreter or a training run
def test_a_huge_claimed_config_is_refused_without_allocating_it(tmp_path, small_config):
    """A small file claiming d=1024, L=8 (a 385 MB model) is refused; the reading process's peak memory barely moves.

    Measured in a fresh process: its peak resident size before and after the refused read.
    """
    path = edited(tmp_path, small_config, lambda p: p["config"].update(d=1024, L=8, d_ff=None))
    assert path.stat().st_size < 300_000
    script = f"""
import resource, torch, gptlib.checkpoint as c
with torch.device("meta"):  # warm up: torch's first meta-device build loads about 75 MB of its own
    c.GPT(c.GPTConfig())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    c.load_checkpoint({str(path)!r})
except ValueError as error:
    print("refused:", error)
print("grew_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert "refused:" in run.stdout and "weights do not match the model" in run.stdout
    grew_mb = int(run.stdout.split("grew_kb")[1]) / 1024
    assert grew_mb < 20  # building the claimed model takes 385 MB (measured: 388 MB before this check existed)


def test_no_model_is_built_off_the_meta_device_while_checking(tmp_path, small_config, monkeypatch):
    """Every GPT that a refused read builds lives on the meta device: no memory for weights."""
    path = edited(tmp_path, small_config, lambda p: p["config"].update(d=10**6, H=1))
    devices = []
    original = GPT.__init__

    def spy(self, config):
        original(self, config)
        devices.append(self.E.device.type)

    monkeypatch.setattr(GPT, "__init__", spy)
    with pytest.raises(ValueError, match=r"weight E has shape \(65, 32\), the model needs \(65, 1000000\)"):
        read_checkpoint(path)
    assert devices == ["meta"]
    # ten million blocks would be ten million Python modules even on the meta device: none is built
    path = edited(tmp_path, small_config, lambda p: p["config"].update(L=10**7))
    devices.clear()  # edited() built the small model it saved
    with pytest.raises(ValueError, match="config says L=10000000 blocks, but the file holds only 31 weights"):
        read_checkpoint(path)
    assert devices == []


@pytest.mark.parametrize("metadata, rule", [
    ({"out": Path("/tmp/x.pt")}, r"metadata\['out'\] is a pathlib.PosixPath"),
    ({"loss": np.float64(1.5)}, r"metadata\['loss'\] is a numpy.float64"),
    ({"steps": np.int64(3)}, r"metadata\['steps'\] is a numpy.int64"),
    ({"history": [{"step": 1, "tags": {"a"}}]}, r"metadata\['history'\]\[0\]\['tags'\] is a builtins.set"),
    ({(1, 2): "tuple key"}, "has a key of type tuple"),
    (["not", "a", "dict"], "metadata must be a dict, got list"),
])
def test_save_refuses_metadata_that_load_would_refuse(tmp_path, small_config, metadata, rule):
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config), {"note": "the good one"})
    before = path.read_bytes()
    with pytest.raises(ValueError, match=rule):
        save_checkpoint(path, GPT(small_config), metadata)
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def nested(depth, innermost=None):
    """A dict holding a dict ... `depth` dicts in all around `innermost` (without it the innermost is empty)."""
    if innermost is None:
        return functools.reduce(lambda inner, _: {"k": inner}, range(depth - 1), {})
    return functools.reduce(lambda inner, _: {"k": inner}, range(depth), innermost)


def test_metadata_nesting_has_one_limit_for_saving_and_reading(tmp_path, small_config):
    assert MAX_NESTING == 32
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config), {"deep": nested(MAX_NESTING - 1)})
    assert read_checkpoint(path)["metadata"]["deep"] == nested(MAX_NESTING - 1)  # metadata itself is the 32nd
    too_deep = rf"metadata(\['k'\]){{{MAX_NESTING}}} is too deep: lists, tuples and dicts nest at most {MAX_NESTING} deep"
    for depth in (MAX_NESTING + 1, 10_000):  # 10,000 deep once hit Python's recursion limit
        with pytest.raises(ValueError, match=too_deep):
            save_checkpoint(path, GPT(small_config), nested(depth))
        file = edited(tmp_path, small_config, lambda p: p.update(metadata=nested(depth)))  # what a file can hold
        with pytest.raises(ValueError, match=too_deep):
            read_checkpoint(file)


def test_metadata_that_holds_itself_is_refused_and_shared_parts_are_walked_once(tmp_path, small_config):
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"metadata\['loop'\]\[0\] is a container that holds itself"):
        save_checkpoint(tmp_path / "m.pt", GPT(small_config), {"loop": loop})
    inner = nested(2)  # checked first at depth 1, then found again 31 deep: its content must be refused there
    with pytest.raises(ValueError, match=rf"metadata\['b'\](\['k'\]){{{MAX_NESTING - 1}}} is too deep"):
        save_checkpoint(tmp_path / "m.pt", GPT(small_config), {"a": inner, "b": nested(MAX_NESTING - 2, inner)})
    shared = functools.reduce(lambda inner, _: [inner, inner], range(30), [])  # 31 lists, 2**30 paths
    saving = threading.Thread(target=save_checkpoint, args=(tmp_path / "m.pt", GPT(small_config), {"s": shared}),
                              daemon=True)
    saving.start()
    saving.join(timeout=60)  # a walk along every path would take hours; once per list, milliseconds
    assert not saving.is_alive()
    loaded = read_checkpoint(tmp_path / "m.pt")["metadata"]["s"]  # pickle keeps the sharing
    assert loaded[0] is loaded[1] and loaded[0][0] is loaded[0][1]


def test_save_refuses_weights_that_load_would_refuse(tmp_path, small_config):
    nan_model = GPT(small_config)
    with torch.no_grad():
        nan_model.blocks[0].mlp.W_1[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"refusing to save .*weight blocks.0.mlp.W_1 holds 1 non-finite values"):
        save_checkpoint(tmp_path / "nan.pt", nan_model)
    with pytest.raises(ValueError, match="weight E has dtype torch.float64, the model needs torch.float32"):
        save_checkpoint(tmp_path / "double.pt", GPT(small_config).double())
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_cannot_be_written_raises_the_oserror_and_leaves_nothing(tmp_path, small_config):
    """save_checkpoint does not probe (a training run saves often; the command probes once, up front):
    the write itself fails with the OSError that says why, and no .part stays behind."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("in the way")
    before = sorted(tmp_path.iterdir())
    with pytest.raises(IsADirectoryError):
        save_checkpoint(tmp_path / "folder", GPT(small_config))
    for path in (tmp_path / "file" / "m.pt", tmp_path / "file" / "sub" / "m.pt"):
        with pytest.raises(OSError, match="File exists|Not a directory"):  # its folder is a file
            save_checkpoint(path, GPT(small_config))
    assert sorted(tmp_path.iterdir()) == before and list((tmp_path / "folder").iterdir()) == []
    assert save_checkpoint(tmp_path / "new" / "sub" / "m.pt", GPT(small_config)).is_file()  # folders made


def test_a_failed_save_leaves_no_part_file_and_the_old_checkpoint(tmp_path, small_config, monkeypatch):
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config))
    before = path.read_bytes()

    def disk_full(payload, file):
        file.write(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(path, GPT(small_config))
    assert path.read_bytes() == before and sorted(tmp_path.iterdir()) == [path]


def test_a_non_contiguous_weight_is_saved_as_its_own_tensor(tmp_path, small_config):
    model = GPT(small_config)
    with torch.no_grad():
        model.W_U = torch.nn.Parameter(model.W_U.detach().T.contiguous().T)  # same values, transposed strides
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "m.pt", model))
    assert torch.equal(loaded.W_U, model.W_U)


def test_the_model_argument_is_checked(tmp_path, small_config):
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config))
    with torch.device("meta"):
        shapes_only = GPT(small_config)
    for call in (lambda: save_checkpoint(tmp_path / "meta.pt", shapes_only),
                 lambda: load_weights_into(shapes_only, path)):
        with pytest.raises(ValueError, match="on the meta device, so they hold no values"):
            call()
    with pytest.raises(ValueError, match="model must be a gptlib GPT, got Linear"):
        load_weights_into(torch.nn.Linear(2, 2), path)
    assert sorted(tmp_path.iterdir()) == [path]


def test_saving_twice_to_one_path_at_once_never_mixes_the_files(tmp_path, small_config, monkeypatch):
    """A second save starting while the first is half-written (two runs sharing --state) writes its own
    temporary file; the path ends up holding one whole checkpoint."""
    first, second = GPT(small_config), GPT(small_config)
    path = tmp_path / "state.pt"
    real_save = torch.save

    def interleaved(payload, file):
        file.write(b"half of the first checkpoint")
        monkeypatch.setattr(torch, "save", real_save)
        save_checkpoint(path, second)  # the other run saves meanwhile
        file.seek(0)
        file.truncate()
        real_save(payload, file)

    monkeypatch.setattr(torch, "save", interleaved)
    save_checkpoint(path, first)
    loaded, _ = load_checkpoint(path)
    assert torch.equal(loaded.E, first.E) and sorted(tmp_path.iterdir()) == [path]


def test_loading_draws_nothing_from_torchs_generator(tmp_path, small_config):
    """A model built after a load is the model built without it: loading neither initialises weights
    it then overwrites nor builds a throwaway model."""
    path = save_checkpoint(tmp_path / "m.pt", GPT(small_config))
    torch.manual_seed(7)
    expected = GPT(small_config).E.clone()
    torch.manual_seed(7)
    loaded, _ = load_checkpoint(path)
    assert torch.equal(GPT(small_config).E, expected)
    assert all(p.requires_grad and p.device.type == "cpu" for p in loaded.parameters())
