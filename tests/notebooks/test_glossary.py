"""The glossary of notebook 00: every link to it names one of its entries, and every notebook links each entry
where that notebook first uses it (issue 44: first use in each notebook, not in the book as a whole)."""

import re

import pytest

from tests.support.notebook_files import NOTEBOOKS, cells, notebook

GLOSSARY_LINK = re.compile(r"\[([^\]]+)\]\((?:00_setup_and_notation\.ipynb)?#Glossary\)")
# Each entry of the glossary (its bold term), with the pattern that marks a use of it in a notebook's prose (matched
# in lower case, inline-code backticks removed). Every notebook links an entry where it first uses it.
TERMS = {
    "compared output": r"compared output",
    "CI": r"\bci\b",
    "nbval": r"\bnbval\b",
    "meta device": r"\bmeta[- ]device",
    "FlopCounterMode": r"flopcountermode",
    "fused kernel": r"fused kernel",
    "gauge": r"\bgauge",
    "manifold": r"\bmanifold",
    "generic": r"\bgeneric",
    "RK4": r"\brk4\b",
    "Frobenius norm": r"\bfrobenius",
    "decoupled weight decay": r"decoupled",
    "tiny Shakespeare": r"tiny shakespeare",
    "checkpoint": r"\bcheckpoint",
    "cross-entropy": r"cross-entropy",
    "entropy": r"(?<!cross-)\bentropy\b",
    "nats/char": r"\bnats?\b",  # "nats" alone too
    "held-out loss": r"\bheld-out\b",
    "warm-up then cosine decay": r"warm-?up,? (?:then|and) cosine|\bcosine decay",  # not "as a warm-up"
    "singular values": r"\bsingular values?\b",
    "spectral norm": r"spectral norm",
    "condition number": r"condition number|\b(?:well|ill)[- ]conditioned",
    "autograd": r"\bautograd\b",
    "central finite differences": r"finite differences?\b",
    "direct logit attribution": r"direct logit attribution",
    "logit lens": r"logit lens",
    "ablation": r"\bablat",
    "activation patching": r"\bpatching\b",
}
# words an entry defines in italics, each checked with the entry that defines it
DEFINED_INSIDE = {"QK gauge": "gauge", "ill-conditioned": "condition number", "well-conditioned": "condition number",
                  "nat": "nats/char"}


def _normal(term: str) -> str:
    return re.sub(r"[`*]", "", term).strip().lower().removesuffix("s")


def glossary_cell():
    return next(c for c in cells(notebook("00")) if c.cell_type == "markdown" and c.source.startswith("## Glossary"))


def glossary_terms() -> set[str]:
    """The bold term of each entry, and any word an entry itself defines in italics."""
    entries = [line for line in glossary_cell().source.splitlines() if line.startswith("* **")]
    bold = {_normal(re.match(r"\* \*\*(.+?)\*\*", line).group(1)) for line in entries}
    return bold | {_normal(word) for word in re.findall(r"(?<!\*)\*([^*]+)\*(?!\*)", glossary_cell().source)}


def _names_an_entry(text: str, terms: set[str]) -> bool:
    text = _normal(text)
    return any(text == term or term.startswith(text + " ") for term in terms)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_glossary_link_names_an_entry(path):
    terms = glossary_terms()
    for cell in cells(path):
        if cell.cell_type == "markdown":
            for text in GLOSSARY_LINK.findall(cell.source):
                assert _names_an_entry(text, terms), f"{path.name}: [{text}] links to the glossary, which has no such entry"


def test_every_glossary_entry_has_a_marker_of_its_use():
    terms = glossary_terms()
    named = {_normal(term) for term in [*TERMS, *DEFINED_INSIDE]}
    assert named == terms, "give each glossary entry a pattern in TERMS (or DEFINED_INSIDE), and drop removed ones"


def prose(path) -> str:
    """A notebook's markdown cells, the glossary itself left out, inline-code backticks removed, and every line
    break made a space, so that a term of two words broken over two lines ("fused\nkernels") is still found."""
    return one_line("\n\n".join(cell.source.replace("`", "") for cell in cells(path)
                                if cell.cell_type == "markdown" and not cell.source.startswith("## Glossary")))


def one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text)


def unlinked_first_use(text: str, pattern: str) -> str | None:
    """The first use of `pattern` in `text` with some context, if it is not inside a link to the glossary; else None."""
    first = re.search(pattern, text.lower())
    if first is None:
        return None
    linked = any(link.start(1) <= first.start() < link.end(1) for link in GLOSSARY_LINK.finditer(text))
    return None if linked else text[max(0, first.start() - 40):first.end() + 40].replace("\n", " ")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_links_each_glossary_word_where_it_first_uses_it(path):
    text = prose(path)
    missing = {term: context for term, pattern in TERMS.items()
               if (context := unlinked_first_use(text, pattern)) is not None}
    assert not missing, f"{path.name} first uses these without a link to the glossary: {missing}"


def test_the_check_finds_an_unlinked_first_use_and_accepts_a_linked_one():
    assert unlinked_first_use("a [checkpoint](#Glossary), then a checkpoint", TERMS["checkpoint"]) is None
    assert unlinked_first_use("a checkpoint, then a [checkpoint](#Glossary)", TERMS["checkpoint"]) is not None
    assert unlinked_first_use("no such word here", TERMS["checkpoint"]) is None
    assert unlinked_first_use(one_line("no fused\nkernels here"), TERMS["fused kernel"]) is not None


def test_the_glossary_leaves_question_1_2_and_exercise_3_to_the_learner():
    source = glossary_cell().source
    assert "R^{-\\top}" not in source and "GL(" not in source
