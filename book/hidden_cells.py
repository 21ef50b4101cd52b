"""A hidden cell's toggle named by what it shows: myst-nb's <summary> without its fixed aria-label.

myst-nb writes `<summary aria-label="Toggle hidden content">` around the visible "Show code cell
content" / "Hide code cell content", so a screen reader announces a name that is not the visible
label and a voice-control user cannot say what they see (WCAG 2.5.3, axe's
label-content-name-mismatch). Without the aria-label the summary is named by its visible text
(the line for the other state is display: none). Same markup otherwise.
"""

from html import escape

from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput


def visit_hidden_cell(self, node: HideCodeCellNode) -> None:
    self.body.append(f'<details class="admonition hide {" ".join(node["classes"])}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n</summary>\n')


def setup(app):
    app.add_node(HideCodeCellNode, override=True, html=(visit_hidden_cell, depart_HideCellInput))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
