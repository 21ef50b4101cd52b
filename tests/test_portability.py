"""Every notebook matches its committed outputs under simulated other CPUs and thread counts.

Each variant re-runs nbval over notebooks/ in a fresh process with tests/portability.py's environment
variables (about a minute each); `make portability` runs the wider matrix.
"""

import pytest

from tests.portability import CI, describe, run_variant


@pytest.mark.parametrize("name", CI)
def test_notebooks_match_their_outputs_under(name):
    failed, output = run_variant(CI[name], ["notebooks"])
    assert not failed, f"{describe(name, CI[name])}: cells that differ: {', '.join(failed)}\n{output[-4000:]}"
