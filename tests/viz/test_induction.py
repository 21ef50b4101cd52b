"""gptlib.viz.induction: the OV eigenvalue figure places each eigenvalue at (real, imaginary)."""

import numpy as np
import pytest
import torch

pytest.importorskip("matplotlib")

from gptlib.viz.induction import ov_eigenvalues_figure  # noqa: E402


def test_each_eigenvalue_is_a_point_at_its_real_and_imaginary_part():
    eigenvalues = torch.tensor([2.0 + 0.0j, 0.5 + 1.5j, 0.5 - 1.5j, -0.25 + 0.0j])
    ax = ov_eigenvalues_figure(eigenvalues, "layer 1 head 2").axes[0]
    np.testing.assert_array_equal(ax.collections[0].get_offsets(), [[2.0, 0.0], [0.5, 1.5], [0.5, -1.5], [-0.25, 0.0]])
    assert ax.get_title() == "layer 1 head 2"
    assert ax.figure.get_label() == ("layer 1 head 2: the 4 eigenvalues in the complex plane; 4 are not negligible "
                                     "(above 0.001 of the largest |eigenvalue|), and 3 of those have a positive real part.")
    assert ax.get_aspect() == 1.0  # the real and imaginary axes share one scale
