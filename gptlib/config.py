"""The architecture's hyperparameters (Lecture 5, Section 0) as one validated dataclass."""

from __future__ import annotations

from dataclasses import dataclass, fields

from . import validation

NORM_PLACEMENTS = ("pre", "post")


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and switches of a decoder-only GPT, named after the lecture's symbols."""

    V: int = 65  # vocabulary size
    T_max: int = 64  # longest sequence the positional table P covers
    d: int = 128  # residual-stream width
    H: int = 4  # heads per attention sublayer; must divide d
    L: int = 4  # number of transformer blocks
    d_ff: int | None = None  # MLP hidden width; None means 4d (Definition 2.1)
    norm: str = "pre"  # "pre" (Definition 3.1) or "post" (Aside 3.5, Exercise 7)
    tie_weights: bool = False  # W_U = E^T (Aside 5.3); off in the course count
    ln_eps: float = 1e-5  # epsilon of Definition 4.1, > 0: a constant row has sigma = 0
    causal: bool = True  # causal mask in every head; False only to show a broken model
    attn_only: bool = False  # blocks without LN_2 and MLP (the induction-head toy model)
    init_std: float = 0.02  # std of the normal init (Project aside 5.2)

    def __post_init__(self) -> None:
        """Check every field (gptlib.validation) and store it in its plain form (object.__setattr__: the dataclass is frozen)."""
        for name in ("V", "T_max", "d", "H", "L"):
            object.__setattr__(self, name, validation.integer(name, getattr(self, name), at_least=1))
        object.__setattr__(self, "d_ff", 4 * self.d if self.d_ff is None else validation.integer("d_ff", self.d_ff, at_least=1))
        if self.d % self.H != 0:
            raise ValueError(f"H must divide d (Section 0): d={self.d} is not a multiple of H={self.H}")
        if not isinstance(self.norm, str) or self.norm not in NORM_PLACEMENTS:
            raise ValueError(f"norm must be one of {NORM_PLACEMENTS}, got {self.norm!r}")
        for name in ("tie_weights", "causal", "attn_only"):
            validation.boolean(name, getattr(self, name))
        if self.attn_only and self.norm == "post":
            raise ValueError("attn_only=True needs norm='pre': an attention-only block is X' = X + MHA(LN_1(X)), "
                             "with no post-norm form")
        object.__setattr__(self, "ln_eps", validation.real("ln_eps", self.ln_eps, above=0))
        object.__setattr__(self, "init_std", validation.real("init_std", self.init_std, above=0))

    @property
    def d_head(self) -> int:
        """d / H, the width of each head (Section 0): derived, so it can never disagree with d and H."""
        return self.d // self.H

    def replace(self, **changes) -> "GPTConfig":
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if "d" in changes and "d_ff" not in changes and self.d_ff == 4 * self.d:
            values["d_ff"] = None  # keep the 4d default in step with a new d
        values.update(changes)
        return GPTConfig(**values)


COURSE_CONFIG = GPTConfig(V=65, T_max=64, d=128, H=4, L=4)
