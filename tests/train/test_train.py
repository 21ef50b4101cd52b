"""Training: the loss falls, the schedule has its closed form, resume is bit-exact, the CLI writes checkpoints."""

import copy
import math
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import torch

from gptlib import GPT, data
from gptlib.analysis import induction
from gptlib.analysis.induction import INDUCTION_CONFIG
from gptlib.checkpoint import load_checkpoint, load_weights_into, save_checkpoint
from gptlib.train import (
    DEVICES,
    Diverged,
    TrainSettings,
    check_device,
    learning_rate,
    mean_loss,
    start_state,
    train,
)
from gptlib.train.__main__ import main

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models train fastest on one thread

TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n" * 4


@pytest.fixture
def tiny(small_config):
    return small_config.replace(L=1)


def text_batches(B=8, T=16):
    ids = data.encode(TEXT)
    return ids, (lambda generator: data.sample_batch(ids, B, T, generator))


def test_a_few_steps_lower_the_loss(tiny):
    ids, next_batch = text_batches()
    windows = data.heldout_windows(ids, 16)
    model = GPT(tiny)
    before = mean_loss(model, *windows)
    assert abs(before - math.log(65)) < 0.1  # a fresh model is close to uniform over V = 65
    train(model, next_batch, TrainSettings(steps=40, warmup=5, lr=1e-2, eval_every=40), progress=False)
    after = mean_loss(model, *windows)
    assert after < before - 1.0


def test_mean_loss_matches_a_per_window_loop(tiny):
    ids, _ = text_batches()
    x, y = data.heldout_windows(ids, 16)
    model = GPT(tiny).eval()
    by_loop = sum(torch.nn.functional.cross_entropy(model(x[i]), y[i]).item() for i in range(len(x))) / len(x)
    assert mean_loss(model, x, y, chunk=3) == pytest.approx(by_loop, rel=1e-6)


def test_learning_rate_schedule_closed_form():
    s = TrainSettings(steps=110, warmup=10, lr=1e-3, min_lr=1e-4)
    assert learning_rate(0, s) == pytest.approx(1e-4) and learning_rate(9, s) == pytest.approx(1e-3)
    assert learning_rate(10, s) == pytest.approx(1e-3)  # cosine starts at the peak
    assert learning_rate(60, s) == pytest.approx((1e-3 + 1e-4) / 2)  # half-way: cos(pi/2) = 0
    assert learning_rate(110, s) == pytest.approx(1e-4)
    with pytest.raises(ValueError, match="min_lr must be a finite number > 0 and <= 0.0001"):
        TrainSettings(steps=10, lr=1e-4, min_lr=1e-3)
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        TrainSettings(steps=0)


def test_resume_through_a_checkpoint_is_bit_exact(tmp_path, tiny, same_state):
    _, next_batch = text_batches()
    settings = TrainSettings(steps=6, warmup=2, lr=1e-2, eval_every=3)
    torch.manual_seed(1)
    straight = GPT(tiny)
    train(straight, next_batch, settings, progress=False)

    torch.manual_seed(1)
    first = GPT(tiny)
    state = train(first, next_batch, TrainSettings(**{**settings.__dict__, "steps": 3}), progress=False)
    path = save_checkpoint(tmp_path / "state.pt", first, training=state)
    resumed = GPT(tiny)
    resume = load_weights_into(resumed, path)["training"]
    train(resumed, next_batch, settings, resume=resume, progress=False)
    assert same_state(straight, resumed)

    # the check can fail: resuming without the batch generator's state gives other weights
    wrong = GPT(tiny)
    load_weights_into(wrong, path)
    fresh_generator = torch.Generator().manual_seed(settings.seed).get_state()
    train(wrong, next_batch, settings, resume={**resume, "generator": fresh_generator}, progress=False)
    assert not same_state(straight, wrong)


def test_cli_trains_the_induction_task_and_resumes(tmp_path, same_state):
    common = ["induction", "--batch-size", "4", "--eval-every", "2", "--warmup", "1"]
    main(common + ["--steps", "4", "--out", str(tmp_path / "straight.pt")])
    main(common + ["--steps", "2", "--out", str(tmp_path / "half.pt"), "--state", str(tmp_path / "s.pt")])
    main(common + ["--steps", "4", "--out", str(tmp_path / "resumed.pt"), "--state", str(tmp_path / "s.pt"), "--resume"])
    straight, meta = load_checkpoint(tmp_path / "straight.pt")
    resumed, _ = load_checkpoint(tmp_path / "resumed.pt")
    assert same_state(straight, resumed)
    metadata = meta["metadata"]
    assert metadata["command"].startswith("python -m gptlib.train induction") and metadata["steps"] == 4
    assert metadata["tokens_seen"] == 4 * 4 * 64 and len(metadata["induction_scores"]) == 2
    assert "training" not in meta  # the final file omits AdamW's state


def test_cli_trains_on_a_given_corpus(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text(TEXT * 10)
    out = main(["shakespeare", "--steps", "2", "--batch-size", "2", "--corpus", str(corpus), "--eval-every", "1",
                "--warmup", "1", "--out", str(tmp_path / "c.pt")])
    metadata = load_checkpoint(out)[1]["metadata"]
    assert [h["step"] for h in metadata["history"]] == [1, 2] and metadata["val_loss"] < math.log(65) + 0.5


def _available(name: str) -> bool:
    try:
        return check_device(name) is not None
    except ValueError:
        return False


def device_or_skip(name: str) -> torch.device:
    try:
        return check_device(name)
    except ValueError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize("name", DEVICES)
def test_training_on_each_device_lowers_the_loss_and_saves_a_cpu_checkpoint(name, tmp_path, tiny):
    device = device_or_skip(name)
    ids, next_batch = text_batches()  # CPU batches: train() moves them
    windows = data.heldout_windows(ids, 16)  # CPU windows: mean_loss moves them
    torch.manual_seed(0)
    model = GPT(tiny).to(device)
    before = mean_loss(model, *windows)
    train(model, next_batch, TrainSettings(steps=40, warmup=5, lr=1e-2, eval_every=40), progress=False)
    assert mean_loss(model, *windows) < before - 1.0
    path = save_checkpoint(tmp_path / "m.pt", model)
    assert all(t.device.type == "cpu" for t in torch.load(path, weights_only=True)["state_dict"].values())


def test_cli_trains_on_the_cpu_device_and_records_it(tmp_path):
    out = main(["induction", "--steps", "2", "--batch-size", "2", "--eval-every", "2", "--warmup", "1",
                "--device", "cpu", "--threads", "1", "--out", str(tmp_path / "cpu.pt")])
    assert load_checkpoint(out)[1]["metadata"]["device"] == "cpu"


def test_progress_bar_reports_tokens_per_second(capsys, tiny):
    _, next_batch = text_batches(B=4, T=16)
    train(GPT(tiny), next_batch, TrainSettings(steps=3, warmup=1, eval_every=3), progress=True)
    bar = capsys.readouterr().err.strip().splitlines()[-1]
    assert "3/3" in bar and "tok_per_s=" in bar
    assert float(bar.split("tok_per_s=")[1].split("]")[0].replace(",", "")) > 0


FAULTS_PER_STEP = """
import resource, torch
from gptlib import COURSE_CONFIG, GPT
from gptlib.train import keep_freed_memory
torch.set_num_threads(1)  # the same faults with more threads, and no threads waiting on a busy machine
torch.manual_seed(0)
model = GPT(COURSE_CONFIG)
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
idx, targets = torch.randint(0, COURSE_CONFIG.V, (2, 32, 64))  # (B, T) each: the course shapes
def step():
    optimizer.zero_grad(set_to_none=True)
    model(idx, targets)[1].backward()
    optimizer.step()
def faults_per_step():
    for _ in range(3):  # the heap grows to its peak over the first few steps
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):  # enough steps that a one-off burst (a thread's arena growing: ~1,000 faults) is diluted
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10
default = faults_per_step()
assert keep_freed_memory()  # from here on, as in every training run
print(default, faults_per_step())
"""


@pytest.mark.slow  # a fresh interpreter or a training run
def test_keeping_freed_memory_spares_training_steps_their_page_faults():
    resource = pytest.importorskip("resource")
    if not hasattr(resource, "getrusage"):
        pytest.skip("no getrusage here")
    # A fresh interpreter, so that the first steps run under the C library's own malloc settings.
    run = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP], capture_output=True, text=True, timeout=240)
    if "AssertionError" in run.stderr:
        pytest.skip("the C library has no mallopt (not glibc)")
    assert run.returncode == 0, run.stderr
    default, kept = map(float, run.stdout.split())
    if default < 300:
        pytest.skip(f"this malloc returns little memory to the kernel anyway ({default:.0f} page faults a step)")
    # Seen here over 10 steps: default 3,100-6,200 faults a step, kept 25-103 (0 in most steps, now and
    # then a burst of 256-1,536 as some heap grows); at half the batch the default fell to 360 at times.
    assert kept < default / 5, (kept, default)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Good files a bad command must leave alone, and bad ones to feed it.

    out.pt: a final induction checkpoint; state.pt: an induction snapshot at step 2; foreign.pt:
    a snapshot of a one-layer model; garbage.pt, binary.txt, unknown.txt; a regular file `file`.
    """
    d = tmp_path_factory.mktemp("files")
    main(["induction", "--steps", "2", "--batch-size", "2", "--eval-every", "2", "--warmup", "1",
          "--out", str(d / "out.pt"), "--state", str(d / "state.pt")])
    _, next_batch = text_batches()
    foreign = GPT(INDUCTION_CONFIG.replace(L=1))
    resume = train(foreign, next_batch, TrainSettings(steps=1), progress=False)
    save_checkpoint(d / "foreign.pt", foreign, training=resume)
    odd_time = torch.load(d / "state.pt", weights_only=True)
    odd_time["training"]["wall_time_s"] = "abc"
    torch.save(odd_time, d / "odd_time.pt")
    (d / "garbage.pt").write_bytes(b"\x00not a checkpoint" * 100)
    (d / "binary.txt").write_bytes(bytes(range(256)) * 10)
    (d / "unknown.txt").write_text(TEXT + "".join(chr(0x400 + i) for i in range(40)))
    (d / "file").write_text("a regular file")
    return d


def run_refused(tmp_path, files, capsys, argv):
    """Run the command in a copy of `files`; return (exit code, the error line), checking nothing changed."""
    for f in files.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "folder").mkdir()
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()}
    argv = [a.format(d=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    after = {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()}
    assert after == before  # every file byte for byte, and no new file (no .part, no half-written --out)
    return exited.value.code, errors[0]


INDUCTION = ["induction", "--steps", "3", "--batch-size", "2", "--eval-every", "1", "--out", "{d}/out.pt"]


@pytest.mark.parametrize(
    "argv, rule",
    [
        (["--lr", "inf"], "--lr must be a finite number > 0, got inf"),
        (["--lr", "nan"], "--lr must be a finite number > 0, got nan"),
        (["--lr", "0"], "--lr must be a finite number > 0, got 0.0"),
        (["--grad-clip", "nan"], "--grad-clip must be a finite number > 0, got nan"),
        (["--grad-clip", "-1"], "--grad-clip must be a finite number > 0, got -1.0"),
        (["--weight-decay", "-1"], "--weight-decay must be a finite number >= 0, got -1.0"),
        (["--weight-decay", "inf"], "--weight-decay must be a finite number >= 0, got inf"),
        (["--min-lr", "0.1"], "--min-lr must be a finite number > 0 and <= 0.002, got 0.1"),
        (["--warmup", "-1"], "--warmup must be an integer >= 0, got -1"),
        (["--steps", "0"], "--steps must be an integer >= 1, got 0"),
        (["--steps", "2.5"], "argument --steps: invalid int value: '2.5'"),
        (["--batch-size", "-3"], "--batch-size must be an integer >= 1, got -3"),
        (["--eval-every", "0"], "--eval-every must be an integer >= 1, got 0"),
        (["--seed", "-1"], "--seed must be an integer in [0, 18446744073709551615], got -1"),
        (["--seed", str(2**64)], "--seed must be an integer in [0, 18446744073709551615]"),
        (["--threads", "0"], f"--threads must be an integer in [1, {os.cpu_count()}], got 0"),
        (["--threads", "1000000"], f"--threads must be an integer in [1, {os.cpu_count()}], got 1000000"),
        (["--corpus", "{d}/unknown.txt"], "--corpus and --download are for the shakespeare task"),
        (["--download"], "--corpus and --download are for the shakespeare task"),
        (["--eval-windows", "0"], "--eval-windows must be an integer >= 1, got 0"),
        (["--T", "65"], "--T 65 exceeds the model's T_max=64"),
        (["--T", "5"], "--T 5 does not suit the induction task: need T >= 8"),
        (["--batch-size", "100000"], "--batch-size * --T must be <= 1,048,576 tokens a step"),
        (["--resume"], "--resume needs --state PATH"),
        (["--resume", "--state", "{d}/absent.pt"], "--state: no checkpoint file at"),
        (["--resume", "--state", "{d}/garbage.pt"], "garbage.pt is not a readable checkpoint"),
        (["--resume", "--state", "{d}/foreign.pt"], "written for another model: its config differs in L 1 (file) vs 2"),
        (["--resume", "--state", "{d}/out.pt"], "out.pt holds no resume state"),
        (["--resume", "--state", "{d}/state.pt", "--steps", "1"], "resume state is at step 2, beyond steps=1"),
        (["--resume", "--state", "{d}/odd_time.pt"], "the resume state's wall_time_s must be a finite number >= 0"),
        (["--out", "{d}/folder"], "--out {d}/folder is a directory; give the path of a file"),
        (["--out", "/dev/null"], "--out /dev/null is not a regular file; give the path of a file"),
        (["--out", "{d}/file/x.pt"], "--out {d}/file/x.pt cannot be written: {d}/file is a file, not a folder"),
        (["--out", "{d}/file/new/x.pt"], "cannot be written: {d}/file is a file, not a folder"),
        (["--state", "{d}/file/s.pt"], "--state {d}/file/s.pt cannot be written: {d}/file is a file"),
        (["--state", "{d}/out.pt"], "--state and --out must be different files"),
        *[(["--device", name], f"device {name!r} is not available here") for name in DEVICES
          if name != "cpu" and not _available(name)],
    ],
)
def test_cli_refuses_bad_flags_and_files_before_any_work(tmp_path, files, capsys, argv, rule):
    code, line = run_refused(tmp_path, files, capsys, INDUCTION + argv)
    assert code == 2 and rule.format(d=tmp_path) in line


@pytest.mark.parametrize(
    "corpus, rule",
    [
        ("/nonexistent/tiny.txt", "no corpus file at /nonexistent/tiny.txt"),
        ("{d}/binary.txt", "binary.txt is not UTF-8 text"),
        ("{d}/unknown.txt", "65-character vocabulary: 'Ѐ', 'Ё', 'Ђ', 'Ѓ', 'Є' and 35 more"),
    ],
)
def test_cli_refuses_a_bad_corpus(tmp_path, files, capsys, corpus, rule):
    argv = ["shakespeare", "--steps", "1", "--corpus", corpus, "--out", "{d}/out.pt"]
    code, line = run_refused(tmp_path, files, capsys, argv)
    assert code == 2 and rule.format(d=tmp_path) in line


def test_cli_download_without_network_is_one_line(tmp_path, files, capsys, monkeypatch):
    def no_network(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(data, "LOCAL_CORPUS", tmp_path / "absent.txt")
    monkeypatch.setattr(data, "DEFAULT_CACHE_DIR", tmp_path / "cache")
    argv = ["shakespeare", "--steps", "1", "--download", "--out", "{d}/out.pt"]
    code, line = run_refused(tmp_path, files, capsys, argv)
    assert code == 2 and f"could not download the corpus from {data.CORPUS_URL}: no network" in line


def test_a_diverging_run_stops_and_replaces_no_checkpoint(tmp_path, files, capsys):
    """An enormous learning rate makes the loss NaN within a few steps; --out and --state keep their bytes."""
    argv = ["induction", "--steps", "4", "--batch-size", "2", "--warmup", "1", "--lr", "1e30", "--eval-every", "100",
            "--out", "{d}/out.pt", "--state", "{d}/state.pt"]
    code, line = run_refused(tmp_path, files, capsys, argv)
    assert code == 1
    assert "training stopped at step" in line and "is nan" in line
    assert "--out was not written; --state was not written" in line


def test_train_stops_before_a_step_on_a_non_finite_loss(tiny):
    _, next_batch = text_batches()
    model = GPT(tiny)
    with torch.no_grad():
        model.P[0, 0] = float("nan")  # position 0 is in every window
    before = {k: v.clone() for k, v in model.state_dict().items()}
    evaluations = []
    with pytest.raises(Diverged, match="training stopped at step 1: the training loss is nan"):
        train(model, next_batch, TrainSettings(steps=3, eval_every=1), evaluate=lambda m: {"x": 1.0},
              on_eval=lambda *args: evaluations.append(args), progress=False)
    assert not evaluations
    assert all(torch.equal(before[k].nan_to_num(), v.nan_to_num()) for k, v in model.state_dict().items())


@pytest.mark.parametrize("loss, rule", [(float("inf"), "x is inf"), (float("nan"), "x is nan")])
def test_a_non_finite_evaluation_stops_before_on_eval(tiny, loss, rule):
    _, next_batch = text_batches()
    saved = []
    with pytest.raises(Diverged, match=rule):
        train(GPT(tiny), next_batch, TrainSettings(steps=2, eval_every=1), evaluate=lambda m: {"x": loss},
              on_eval=lambda *args: saved.append(args), progress=False)
    assert not saved


@pytest.mark.parametrize(
    "edit, rule",
    [
        (lambda r: r.pop("generator"), r"lacks \['generator'\]"),
        (lambda r: r.update(step=-1), "step must be an integer >= 0"),
        (lambda r: r.update(step=1.5), "step must be an integer >= 0"),
        (lambda r: r.update(history=None), "history must be a list"),
        (lambda r: r.update(generator=torch.zeros(3, dtype=torch.uint8)), "generator state does not fit"),
        (lambda r: r["optimizer"]["state"][0].update(exp_avg=torch.zeros(2)), "weights of other shapes"),
        (lambda r: r["optimizer"].update(param_groups=[]), "does not fit"),
    ],
)
def test_a_bad_resume_state_is_refused_before_any_step(tiny, edit, rule, same_state):
    _, next_batch = text_batches()
    model = GPT(tiny)
    resume = train(model, next_batch, TrainSettings(steps=1), progress=False)
    edit(resume)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match=rule):
        train(model, next_batch, TrainSettings(steps=3), resume=resume, progress=False)
    assert same_state(before, model)


@pytest.mark.parametrize(
    "changes, rule",
    [
        (dict(steps=True), "steps must be an integer >= 1, got True"),
        (dict(T="64"), "T must be an integer >= 1, got '64'"),
        (dict(lr=float("inf")), "lr must be a finite number > 0"),
        (dict(lr="0.1"), "lr must be a finite number > 0, got '0.1'"),
        (dict(grad_clip=-0.0), "grad_clip must be a finite number > 0, got 0.0"),
        (dict(weight_decay=float("nan")), "weight_decay must be a finite number >= 0"),
        (dict(seed=2**64), "seed must be an integer in"),
    ],
)
def test_settings_refuse_what_training_cannot_use(changes, rule):
    with pytest.raises(ValueError, match=re.escape(rule)):
        TrainSettings(**{"steps": 10, **changes})


def test_a_disk_that_fills_up_during_training_is_one_line(tmp_path, files, capsys, monkeypatch):
    """Writing --out fails after training (the probe passed, then the disk filled): exit code 1, the
    old --out intact, and the line says --state holds the last step."""
    real_save = torch.save

    def disk_full_for_out(payload, file):
        if "training" not in payload:  # the final --out checkpoint
            raise OSError(28, "No space left on device")
        real_save(payload, file)

    monkeypatch.setattr(torch, "save", disk_full_for_out)
    (tmp_path / "out.pt").write_bytes((files / "out.pt").read_bytes())
    before = (tmp_path / "out.pt").read_bytes()
    with pytest.raises(SystemExit) as exited:
        main(["induction", "--steps", "2", "--batch-size", "2", "--eval-every", "2", "--warmup", "1",
              "--out", str(tmp_path / "out.pt"), "--state", str(tmp_path / "s.pt")])
    err = capsys.readouterr().err
    assert exited.value.code == 1 and "Traceback" not in err
    assert f"could not write --out {tmp_path / 'out.pt'}: No space left on device. --out was not written; " \
           "--state holds step 2" in err
    assert (tmp_path / "out.pt").read_bytes() == before and not list(tmp_path.glob("*.part"))


def test_a_state_folder_that_becomes_unwritable_during_training_is_one_line(tmp_path, capsys, monkeypatch):
    """The up-front probe passed, then --state's folder stopped taking new files after the first snapshot
    (modelled by refusing every file created in it, as chmod would for anyone but root): exit code 1,
    one line, and the step-2 snapshot intact."""
    folder = tmp_path / "run"
    real_open, real_os_open = open, os.open

    def refused(file):  # a file in the folder, or the folder itself (tempfile's O_TMPFILE opens that)
        file = os.path.abspath(file)
        return (folder / "s.pt").exists() and str(folder) in (file, os.path.dirname(file))

    def open_unless_refused(file, *args, **kwargs):
        if refused(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    def os_open_unless_refused(file, *args, **kwargs):  # tempfile creates its files with os.open
        if refused(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", open_unless_refused)
    monkeypatch.setattr(os, "open", os_open_unless_refused)
    with pytest.raises(SystemExit) as exited:
        main(["induction", "--steps", "4", "--batch-size", "2", "--eval-every", "2", "--warmup", "1",
              "--out", str(tmp_path / "out.pt"), "--state", str(folder / "s.pt")])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert exited.value.code == 1 and "Traceback" not in err
    assert f"could not write --state {folder / 's.pt'}: Permission denied. --out was not written; " \
           "--state holds step 2" in err
    assert load_weights_into(GPT(INDUCTION_CONFIG), folder / "s.pt")["training"]["step"] == 2
    assert sorted(f.name for f in folder.iterdir()) == ["s.pt"] and not (tmp_path / "out.pt").exists()


@pytest.mark.parametrize("training", [False, True])
def test_mean_loss_checks_its_input_and_restores_the_mode(tiny, training):
    model = GPT(tiny).train(training)
    x, y = data.heldout_windows(data.encode(TEXT), 16)
    with pytest.raises(ValueError, match="chunk must be an integer >= 1, got 0"):
        mean_loss(model, x, y, chunk=0)
    with pytest.raises(ValueError, match="at least one window"):
        mean_loss(model, x[:0], y[:0])
    with pytest.raises(ValueError, match=r"targets must lie in \[0, V\)"):
        mean_loss(model, x, y + 100, chunk=2)
    assert model.training == training


def test_ctrl_c_during_training_is_one_line_naming_what_is_kept(tmp_path, capsys, monkeypatch):
    real_batch, calls = induction.training_batch, []

    def interrupted_at_step_3(*args):
        calls.append(1)
        if len(calls) == 4:  # the first call is the up-front check of the task's batch rules
            raise KeyboardInterrupt
        return real_batch(*args)

    monkeypatch.setattr(induction, "training_batch", interrupted_at_step_3)
    with pytest.raises(SystemExit) as exited:
        main(["induction", "--steps", "5", "--batch-size", "2", "--eval-every", "2", "--warmup", "1",
              "--out", str(tmp_path / "out.pt"), "--state", str(tmp_path / "s.pt")])
    err = capsys.readouterr().err
    assert exited.value.code == 130 and "Traceback" not in err
    assert "error: interrupted. --out was not written; --state holds step 2" in err
    assert sorted(f.name for f in tmp_path.iterdir()) == ["s.pt"]


def test_a_resume_state_brings_adams_moments_and_the_settings_bring_its_hyperparameters(tiny):
    """A snapshot's param_groups are not trusted: betas='ab' in one used to crash AdamW at its first step."""
    _, next_batch = text_batches()
    model = GPT(tiny)
    resume = train(model, next_batch, TrainSettings(steps=1), progress=False)
    for group in resume["optimizer"]["param_groups"]:
        group.update(betas="ab", eps=None, weight_decay=-5.0)
    settings = TrainSettings(steps=3, weight_decay=0.25)
    optimizer, *_ = start_state(model, settings, resume)
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.25, 0.0]
    assert all(g["betas"] == (0.9, 0.95) and g["eps"] == 1e-8 for g in optimizer.param_groups)
    in_saved_order = [p for group in optimizer.param_groups for p in group["params"]]
    assert all(torch.equal(optimizer.state[p]["exp_avg"], resume["optimizer"]["state"][i]["exp_avg"])
               for i, p in enumerate(in_saved_order))
    train(model, next_batch, settings, resume=resume, progress=False)


def test_train_takes_a_built_start_as_its_resume_state_and_not_both(tiny, same_state):
    """The command builds start_state while it checks its flags, and hands it to train: AdamW is built once."""
    _, next_batch = text_batches()
    settings = TrainSettings(steps=4, warmup=1, lr=1e-2)
    model = GPT(tiny)
    resume = train(model, next_batch, TrainSettings(**{**settings.__dict__, "steps": 2}), progress=False)
    from_start, from_resume = GPT(tiny), GPT(tiny)
    for twin in (from_start, from_resume):
        twin.load_state_dict(model.state_dict())
    start = start_state(from_start, settings, copy.deepcopy(resume))  # AdamW takes the moment tensors as they are
    train(from_start, next_batch, settings, start=start, progress=False)
    train(from_resume, next_batch, settings, resume=resume, progress=False)
    assert same_state(from_start, from_resume) and not same_state(from_start, model)
    with pytest.raises(ValueError, match="a resume state or a start built from one, not both"):
        train(model, next_batch, settings, resume=resume, start=start_state(model, settings, resume), progress=False)
