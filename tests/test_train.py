"""Training: the loss falls, the schedule has its closed form, resume is bit-exact, the CLI writes checkpoints."""

import math

import pytest
import torch

from gptlib import GPT, data
from gptlib.checkpoint import load_checkpoint, load_weights_into, save_checkpoint
from gptlib.train import TrainSettings, learning_rate, main, mean_loss, train

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
    with pytest.raises(ValueError, match="min_lr"):
        TrainSettings(steps=10, lr=1e-4, min_lr=1e-3)
    with pytest.raises(ValueError, match="steps"):
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


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models train fastest on one thread; two threads on a shared machine oversubscribe it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(
    "argv, rule",
    [
        (["shakespeare", "--steps", "1", "--corpus", "/nonexistent/tiny.txt"], "no corpus file at /nonexistent/tiny.txt"),
        (["induction", "--steps", "0"], "steps must be a positive integer"),
    ],
)
def test_cli_reports_bad_input_in_one_line(tmp_path, capsys, argv, rule):
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--out", str(tmp_path / "never.pt")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert rule in err and "Traceback" not in err
    assert not (tmp_path / "never.pt").exists()
