"""Notebook 09 as committed: every build step's stub is untouched, so each checker reads "not attempted yet",
the cells that use the learner's whole model skip with the same words, and nothing trains."""

import re

from tests.support.notebook_files import cells, notebook, texts

CHECKS = ["build.check_layer_norm_module(LayerNorm)", "build.check_attention_head(AttentionHead)",
          "build.check_multi_head_attention(MultiHeadAttention)", "build.check_mlp(MLP)", "build.check_block(Block)",
          "build.check_gpt(GPT)", "build.check_init(init_weights, GPT)", "build.attempt(course_gpt)"]


def test_each_step_reads_not_attempted_in_order_with_its_hints_behind_a_comment():
    nb = cells(notebook("09"))
    found = [next(i for i, c in enumerate(nb) if c.cell_type == "code" and check in c.source) for check in CHECKS]
    assert found == sorted(found)
    for i in found:
        shown = [text for output in nb[i].outputs for text in texts(output)]
        assert shown and all("not attempted yet" in text for text in shown), nb[i].source
    steps = [n for c in nb if c.cell_type == "markdown" for n in re.findall(r"^## Step (\d)", c.source, re.M)]
    assert steps == [str(k) for k in range(1, 10)]
    hidden = [c.source for c in nb if c.cell_type == "code" and "exercises.show_solution(" in c.source]
    assert len(hidden) == 7 and all(line.startswith("#") for s in hidden for line in s.splitlines() if "exercises." in line)


def test_the_training_cell_skips_and_says_why():
    nb = cells(notebook("09"))
    cell = next(c for c in nb if c.cell_type == "code" and "train_on_shakespeare(mine)" in c.source)
    shown = [text for output in cell.outputs for text in texts(output)]
    assert shown and all("not attempted yet" in text for text in shown)
