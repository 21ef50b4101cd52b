"""gptlib.train.own_model: any module mapping ids to logits trains with gptlib's loop and samples with
gptlib.sampling; the plain reference GPT learns as gptlib's own does (the full run: benchmarks/build_track.py)."""

import json

import pytest
import torch
from torch import nn

from gptlib import GPT, GPTConfig
from gptlib.exercises.answers import build as build_solutions
from gptlib.train import TrainSettings
from gptlib.train.own_model import AsGPT, TrainingRun, load_measured_runs, sample_text, train_on_shakespeare

pytestmark = pytest.mark.slow  # starts processes or trains: `pytest -m slow` (not in `pytest -m unit`)

SHORT = TrainSettings(steps=40, batch_size=16, T=32, lr=3e-3, warmup=5, eval_every=20)
SIZES = dict(V=65, T_max=32, d=64, H=4, L=2, d_ff=256)


def test_the_plain_reference_gpt_learns_and_tracks_gptlib(corpus_path, one_thread):
    torch.manual_seed(0)
    plain = build_solutions.init_weights(build_solutions.GPT(*SIZES.values()))
    mine = train_on_shakespeare(plain, SHORT, eval_windows=50, corpus=corpus_path, progress=False)
    torch.manual_seed(0)
    theirs = train_on_shakespeare(GPT(GPTConfig(**SIZES)), SHORT, eval_windows=50, corpus=corpus_path, progress=False)
    assert mine.steps == theirs.steps == (20, 40)
    assert mine.val_losses[-1] < 3.4 < 4.17  # from ln 65 = 4.17 at the start
    assert abs(mine.val_losses[-1] - theirs.val_losses[-1]) < 0.1  # the same recipe learns alike
    text = sample_text(plain, "ROMEO:\n", 20, T_max=32)
    assert text.startswith("ROMEO:\n") and len(text) == len("ROMEO:\n") + 20


def test_as_gpt_gives_logits_and_the_loss_of_any_module_in_gptlib_s_form():
    class Bigram(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Embedding(65, 65)

        def forward(self, idx):
            return self.table(idx)

    model = AsGPT(Bigram(), V=65, T_max=8)
    idx = torch.randint(0, 65, (2, 8))
    Z, loss = model(idx, idx)
    assert Z.shape == (2, 8, 65) and model(idx[0]).shape == (8, 65)
    torch.testing.assert_close(loss, nn.functional.cross_entropy(Z.reshape(-1, 65), idx.reshape(-1)))


def test_a_tiny_corpus_trains_a_few_steps_and_the_run_records_time_and_losses(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("To be, or not to be: that is the question.\n" * 40)
    settings = TrainSettings(steps=4, batch_size=2, T=8, warmup=1, eval_every=2)
    torch.manual_seed(0)
    run = train_on_shakespeare(build_solutions.GPT(65, 8, 16, 2, 1, 64), settings, eval_windows=4, corpus=corpus,
                               progress=False)
    assert run.steps == (2, 4) and len(run.val_losses) == len(run.seconds) == len(run.cpu_seconds) == 2
    assert 0 < run.seconds[0] < run.seconds[1]
    assert run.reached(100.0) == run.seconds[0] and run.reached(0.0) is None


def test_the_measured_runs_load_as_recorded(tmp_path):
    stored = {"command": "python -m benchmarks.build_track", "machine": {"cpu": "x"}, "runs": [
        {"name": "a", "steps": [1], "seconds": [1.0], "cpu_seconds": [1.0], "val_losses": [3.0], "train_losses": [3.1]}]}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(stored))
    meta, runs = load_measured_runs(path)
    assert meta == {"command": stored["command"], "machine": {"cpu": "x"}}
    assert runs == [TrainingRun("a", (1,), (1.0,), (1.0,), (3.0,), (3.1,))]



def test_the_shipped_runs_are_found_where_the_wheel_puts_them():
    """Notebook 09 reads gptlib/checkpoints/build_track.json by default (package data), wherever this module lives."""
    meta, runs = load_measured_runs()
    assert meta["command"] and len(runs) == 2  # the plain and the reference run
