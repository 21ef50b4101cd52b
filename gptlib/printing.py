"""Printing for compared notebook outputs: text that reads the same on every CPU.

Digits at the level of float rounding differ between CPUs, so a compared output never prints
them. It prints either a verdict against a bound the text states, or a value rounded coarsely
with everything under a floor shown as the floor:

    verdict(3.1e-8, 1e-5)  -> '<= 1e-05: yes'          verdict(3.2e-4, 1e-5) -> '<= 1e-05: NO, it is 3.2e-04'
    coarse(3.1e-15)        -> '< 1e-12'                coarse(3.2e-4)        -> '3.2e-04'
"""

from __future__ import annotations

import torch


def _number(value) -> float:
    return value.item() if isinstance(value, torch.Tensor) else float(value)


def verdict(value: float, bound: float) -> str:
    """'<= bound: yes' when value <= bound; otherwise '<= bound: NO, it is <value>' (two digits)."""
    value = _number(value)
    if value <= bound:
        return f"<= {bound:.0e}: yes"
    return f"<= {bound:.0e}: NO, it is {value:.1e}"


def coarse(value: float, floor: float = 1e-12) -> str:
    """'< floor' when value < floor (its digits there are rounding noise); else two significant digits.

    Where the digits above the floor matter, print verdict() against a stated bound instead.
    """
    value = _number(value)
    return f"< {floor:.0e}" if value < floor else f"{value:.1e}"
