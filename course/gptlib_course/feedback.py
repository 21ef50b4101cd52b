"""A student's feedback page (OUT/feedback/<student>.html), made from their stored results and the gradebook.

What the checker said, case by case, with the points the gradebook gives; a hidden case shows its verdict in
fixed words, never its code, configurations, details or the student's own error text (judge.run_case wrote
them so). Every text that a student could have written is escaped and cleaned of control characters.
"""

from __future__ import annotations

import html

from . import gradebook

_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "not attempted yet": "#757575", "error": "#ef6c00"}


def _text(text: str) -> str:
    """Student-reachable text for a page: escaped, without control characters, its line breaks as <br>."""
    return "<br>".join(html.escape(gradebook.clean(line)) for line in str(text).split("\n"))


def page(student: str, result: dict, book: gradebook.Book) -> str:
    """A student's page from their stored result: per assignment its score (and the late policy's effect),
    then per question and case the points and the checker's verdict and message (a hidden case: fixed words),
    and what the grader noted of the student's folder (a duplicate notebook)."""
    e = _text
    scores = {a: gradebook.score(book, a, next((n for n in result["notebooks"] if n["notebook"] == a), None))
              for a in book.assignments}
    parts = [f"<!doctype html><meta charset='utf-8'><title>Feedback: {e(student)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em} td{vertical-align:top;padding:4px 8px} "
             "div.text{font-family:monospace}</style>",
             f"<h1>Feedback for {e(student)}</h1><p>Overall: {gradebook.overall(book, scores):.1f}%.</p>"]
    for notebook in result["notebooks"]:
        name = notebook["notebook"]
        score = scores.get(name)
        if score is not None:
            late = (f" Handed in {score.hours_late:.1f} hours after the deadline: {score.kept:.0%} of the points kept."
                    if score.kept < 1 else "")
            parts.append(f"<h2>{e(name)}</h2><p>{score.earned:g} of {score.possible:g} points.{e(late)}</p>")
        else:
            parts.append(f"<h2>{e(name)}</h2>")
        parts.append("<table><tr><th>question</th><th>test</th><th>points</th><th>verdict</th></tr>")
        for o in notebook["outcomes"]:
            case = "hidden" if o["hidden"] else "public"
            worth = book.assignments[name].points.get(o["question"], {}).get(case, 0) if score is not None else o["points"]
            text = "\n".join([o["message"], *o["details"]])
            parts.append(f"<tr class='{case}'><td>{e(o['question'])}</td>"
                         f"<td>{'hidden variant' if o['hidden'] else 'public'}</td>"
                         f"<td>{worth if o['earned'] > 0 else 0:g} / {worth:g}</td>"
                         f"<td style='border-left:4px solid {_COLOURS.get(o['status'], '#000')}'><b>{e(o['status'])}</b>"
                         f"<div class='text'>{e(text)}</div></td></tr>")
        parts.append("</table>")
        parts += [f"<p>{e(note)}</p>" for note in notebook.get("notes", [])]
        if notebook["cell_errors"]:
            parts.append("<p>Cells of your notebook that raised an error when graded:</p><ul>")
            parts += [f"<li><div class='text'>{e(error)}</div></li>" for error in notebook["cell_errors"]]
            parts.append("</ul>")
    return "\n".join(parts) + "\n"
