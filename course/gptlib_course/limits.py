"""What a submission may use while it is graded: time, memory, output, processes, and how it is confined
(judge.py enforces the times, sandbox.py the rest). A module of its own, without torch, so that `grade` reads
and refuses a class's files before it loads torch."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    cells_s: float = 120.0  # wall-clock seconds for running the notebook's cells
    call_s: float = 60.0  # wall-clock seconds for one call of the submission's function by a checker
    memory: int = 3 * 2**30  # address space of each of the submission's processes (bytes): torch alone maps ~0.7 GB
    output: int = 2**20  # bytes the submission may print or write to any file
    cpu_s: int = 600  # CPU seconds of each of the submission's processes, over its whole life
    processes: int = 64  # processes and threads of the sandbox's user, the zygote's included: a fork bomb stops here
    tmp: int = 64 * 2**20  # bytes of the sandbox's private /tmp, its only writable place
    confined: bool = True  # False only with grade's --unconfined-... flag (sandbox.py says what is lost)
    read_only: tuple[str, ...] = ()  # host paths a submission may read besides Python and gptlib (tests use it)

    def __post_init__(self):
        for name in ("cells_s", "call_s", "memory", "output", "cpu_s", "processes", "tmp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
