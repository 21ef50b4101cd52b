"""The glossary of notebook 00: every link to it names one of its entries, and the words a newcomer meets
in notebooks 01-04 without a definition in the lecture are entries, linked where the notebooks first use them."""

import re

import pytest

from tests.support.notebook_files import NOTEBOOKS, cells, notebook

GLOSSARY_LINK = re.compile(r"\[([^\]]+)\]\((?:00_setup_and_notation\.ipynb)?#Glossary\)")
# Issue 34's words, each with the text that marks its first use in the notebooks' prose (lower case).
WORDS = {
    "tiny Shakespeare": "tiny shakespeare",
    "checkpoint": "checkpoint",
    "held-out loss": "held-out loss",
    "nats/char": "nats/char",
    "singular values": "singular value",
    "spectral norm": "spectral norm",
    "ill-conditioned": "ill-conditioned",
    "central finite differences": "finite differences",
    "autograd": "autograd",
}
# first used from notebook 05 on, or defined inside another entry
DEFINED_ONLY = ["cross-entropy", "warm-up then cosine decay", "condition number", "QK gauge"]


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


def test_issue_34_words_are_glossary_entries():
    terms = glossary_terms()
    for word in [*WORDS, *DEFINED_ONLY]:
        assert _normal(word) in terms, f"the glossary does not define {word!r}"


@pytest.mark.parametrize("word, marker", WORDS.items())
def test_each_word_is_linked_where_the_notebooks_first_use_it(word, marker):
    prose = [(path.name, cell.source) for path in NOTEBOOKS[:5] for cell in cells(path)
             if cell.cell_type == "markdown" and not cell.source.startswith("## Glossary")]
    name, first = next((name, source) for name, source in prose if marker in source.lower())
    marker = _normal(marker)
    linked = [text for text in GLOSSARY_LINK.findall(first) if marker in _normal(text) or _normal(text) in marker]
    assert linked, f"{name} first uses {word!r} without a link to the glossary"


def test_the_glossary_leaves_question_1_2_and_exercise_3_to_the_learner():
    source = glossary_cell().source
    assert "R^{-\\top}" not in source and "GL(" not in source
