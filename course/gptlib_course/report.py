"""The class report: what the class got wrong, from the grading store (`python -m gptlib_course report`).

Written next to grades.csv (OUT/grades/):

    report.html            the instructor's copy: per assignment and question, the score distribution (public and
                           hidden cases apart), how many students made each named mistake (the checkers' stable
                           identifiers, gptlib.checking.mistakes: two wordings of one mistake count once), how many
                           failed with no mistake named, how many did not attempt it, and who is behind each group
    report-anonymous.html  the copy to share: no name, no id, and a group of 1 to THRESHOLD - 1 students shown as
                           "fewer than THRESHOLD" (and left out of the pictures)
    report.csv             the same numbers, one row per group (exact counts: the instructor's); and
    report-anonymous.csv   the anonymised copy's numbers

Pictures, drawn with matplotlib and embedded as data URIs (the page needs no network): a bar chart per
question of its mistakes by frequency, a heat map of students by build step for notebook 09, and the late
submissions of each assignment with a deadline, by day after it. Every number is computed from the stored
results (results.load_results) and the gradebook: the report never runs a submission. Names and texts are
escaped as data and cleaned of control characters, as on the feedback pages; a who-list holds one name per item
(a name may hold a comma), and the heat map numbers its rows, the page listing the names by number as text (no font
of a picture draws every script, the browser's text does). The same store and gradebook give the same bytes.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import gradebook
from .feedback import _COLOURS
from .results import load_results

ROWS_NAMED = 200  # a heat map of more students groups them by pattern, its rows unnumbered
THRESHOLD = 5  # the anonymised copy shows smaller groups (1 .. THRESHOLD - 1) as "fewer than THRESHOLD"
BUILD_TRACK = "09_build_your_own_gpt"  # the assignment whose questions are build steps: the heat map's
CASES = gradebook.CASES
NOT_SUBMITTED, NAMED = "not submitted", "failed, mistake named"
STATUSES = ("passed", "failed", "error", "not attempted yet", NOT_SUBMITTED)  # a case's verdict, as stored
CELLS = ("passed", NAMED, "failed", "error", "not attempted yet", NOT_SUBMITTED)  # the heat map's categories
_CELL_COLOURS = {**_COLOURS, NAMED: "#8e24aa", NOT_SUBMITTED: "#e0e0e0"}


@dataclass
class Question:
    assignment: str
    question: str
    points: dict[str, float]  # case -> points, from the gradebook
    verdicts: dict[str, dict[str, list[str]]]  # case -> status -> students (every student in one status per case)
    mistakes: dict[str, list[str]]  # mistake id -> students who made it (in any case), most frequent first
    unnamed: list[str]  # failed a case with no mistake named
    not_attempted: list[str]  # the notebook not submitted, or the public case still the stub
    cells: dict[str, str] = field(default_factory=dict)  # student -> heat-map category (the public case's)


@dataclass
class Late:
    assignment: str
    deadline: dt.datetime
    days: dict[str, int]  # submitting student -> started days after the deadline and its grace (0: on time)


@dataclass
class Report:
    students: list[str]
    questions: list[Question]
    late: list[Late]


def analyse(store: dict[str, dict], book: gradebook.Book) -> Report:
    """The report's numbers from the stored results {student: results json} and the gradebook."""
    students = list(store)
    notebooks = {(s, n["notebook"]): n for s, data in store.items() for n in data["notebooks"]}
    questions, late = [], []
    for a, spec in book.assignments.items():
        cases = {s: {(o["question"], "hidden" if o["hidden"] else "public"): o
                     for o in (notebooks.get((s, a)) or {}).get("outcomes", [])} for s in students}
        submitted = {s: (notebooks.get((s, a)) or {}).get("submitted") for s in students}
        for q, points in spec.points.items():
            verdicts = {case: {status: [] for status in STATUSES} for case in points}
            mistakes, unnamed, not_attempted, cells = {}, [], [], {}
            for s in students:
                mine = {case: cases[s].get((q, case)) for case in points}
                status = {case: _status(o, submitted[s]) for case, o in mine.items()}
                for case in points:
                    verdicts[case][status[case]].append(s)
                named = list(dict.fromkeys(m for o in mine.values() if o for m in o.get("mistakes", ())))
                for m in named:
                    mistakes.setdefault(m, []).append(s)
                if "failed" in status.values() and not named:
                    unnamed.append(s)
                first = status.get("public", next(iter(status.values()), NOT_SUBMITTED))
                if first in ("not attempted yet", NOT_SUBMITTED):
                    not_attempted.append(s)
                cells[s] = NAMED if first == "failed" and named else first
            ranked = dict(sorted(mistakes.items(), key=lambda item: (-len(item[1]), item[0])))
            questions.append(Question(a, q, dict(points), verdicts, ranked, unnamed, not_attempted, cells))
        if spec.deadline is not None:
            days = {}
            for s in students:
                if submitted[s] is not None:
                    hours, _ = gradebook.late_factor(book, spec.deadline, submitted[s])
                    on_time = submitted[s] - spec.deadline.timestamp() <= book.late["grace_minutes"] * 60
                    days[s] = 0 if on_time else max(1, math.ceil(hours / 24))
            late.append(Late(a, spec.deadline, days))
    return Report(students, questions, late)


def _status(outcome: dict | None, submitted: float | None) -> str:
    if submitted is None or outcome is None:
        return NOT_SUBMITTED
    return outcome["status"] if outcome["status"] in STATUSES else "error"


# ---- numbers as shown -----------------------------------------------------------------------


def shown(count: int, anonymous: bool, threshold: int = THRESHOLD) -> str:
    """A group's size as the copy shows it: exact, or "fewer than N" for 1 .. N-1 students in the anonymised copy."""
    return f"fewer than {threshold}" if anonymous and 0 < count < threshold else str(count)


def rows(report: Report, anonymous: bool = False, threshold: int = THRESHOLD) -> list[list]:
    """report.csv's rows: assignment, question, group (verdict, mistake, unnamed, not attempted, late), case, label,
    students."""
    out = [["assignment", "question", "group", "case", "label", "students"]]
    for q in report.questions:
        for case, statuses in q.verdicts.items():
            out += [[q.assignment, q.question, "verdict", case, status, shown(len(who), anonymous, threshold)]
                    for status, who in statuses.items()]
        out += [[q.assignment, q.question, "mistake", "any", m, shown(len(who), anonymous, threshold)]
                for m, who in q.mistakes.items()]
        out.append([q.assignment, q.question, "failed, no mistake named", "any", "",
                    shown(len(q.unnamed), anonymous, threshold)])
        out.append([q.assignment, q.question, "not attempted", "public", "",
                    shown(len(q.not_attempted), anonymous, threshold)])
    for late in report.late:
        for day, count in sorted(Counter(late.days.values()).items()):
            out.append([late.assignment, "", "late", "", "on time" if day == 0 else f"day {day}",
                        shown(count, anonymous, threshold)])
    return out


# ---- pictures -------------------------------------------------------------------------------


def _figure(width: float, height: float, left: float = 1.8, bottom: float = 0.9):
    """A figure with fixed margins in inches (a layout engine would cost a second draw)."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display

    figure = Figure(figsize=(width, height), dpi=100)
    figure.subplots_adjust(left=left / width, bottom=bottom / height, right=1 - 0.2 / width, top=1 - 0.35 / height)
    return figure


def _image(figure, alt: str, kind: str = "svg") -> str:
    """The figure as an <img> with a data URI: an SVG's ids cannot collide with another picture's on the page."""
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with rc_context({"svg.hashsalt": "gptlib-course-report"}):  # ids from the drawing, not at random: same class, same bytes
        figure.savefig(buffer, format=kind, metadata={"Date": None} if kind == "svg" else None)
    mime = "image/svg+xml" if kind == "svg" else "image/png"
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt='{html.escape(alt, quote=True)}' src='data:{mime};base64,{data}'>"


def bar_chart(labels: list[str], counts: list[int], title: str, label: str) -> str:
    """A horizontal bar chart as inline SVG written here (one per question: drawing dozens with matplotlib would
    cost seconds), its text escaped as data; its title and numbers also in <title> for screen readers."""
    bar, left, width = 16, 250, 300
    most = max(counts, default=0) or 1
    height = 28 + bar * len(labels) + 24
    lines = [f"<svg xmlns='http://www.w3.org/2000/svg' role='img' width='{left + width + 60}' height='{height}' "
             f"font-family='sans-serif' font-size='11'><title>{_e(title)}: "
             + _e("; ".join(f"{x} {n}" for x, n in zip(labels, counts))) + "</title>",
             f"<text x='0' y='14' font-weight='bold'>{_e(title)}</text>"]
    for i, (x, n) in enumerate(zip(labels, counts)):
        y = 24 + i * bar
        lines.append(f"<text x='{left - 6}' y='{y + bar - 5}' text-anchor='end'>{_e(x)}</text>"
                     f"<rect x='{left}' y='{y + 2}' width='{width * n / most:.1f}' height='{bar - 4}' fill='#8e24aa'/>"
                     f"<text x='{left + width * n / most + 4:.1f}' y='{y + bar - 5}'>{n}</text>")
    lines.append(f"<text x='{left}' y='{height - 6}' fill='#444'>{_e(label)}</text></svg>")
    return "".join(lines)


def heat_map(questions: list[Question], students: list[str], anonymous: bool, threshold: int) -> str:
    """Students (rows, numbered from 1 in heat_map_order: the page lists their names, which a font of the picture
    may not draw) by build step (columns), coloured by the public case's verdict; in the anonymised copy the
    categories (rows) by step, each cell's count shown, and a count of 1 .. threshold - 1 left blank."""
    from matplotlib.colors import ListedColormap, to_rgb

    steps = [q.question for q in questions]
    if anonymous:
        counts = [[sum(q.cells[s] == c for s in students) for q in questions] for c in CELLS]
        figure = _figure(1.6 + 0.9 * len(steps), 3.2)
        axes = figure.add_subplot()
        axes.imshow([[n if n == 0 or n >= threshold else 0 for n in row] for row in counts], cmap="Purples",
                     aspect="auto")
        for i, row in enumerate(counts):
            for j, n in enumerate(row):
                axes.text(j, i, shown(n, True, threshold).replace("fewer than ", "<"), ha="center", va="center",
                          fontsize=8, color="#000")
        axes.set_yticks(range(len(CELLS)), CELLS, fontsize=8)
        title = "Students by build step and verdict"
    else:
        order = heat_map_order(questions, students)
        grid = [[CELLS.index(q.cells[s]) for q in questions] for s in order]
        figure = _figure(1.6 + 0.9 * len(steps), 1.2 + min(0.16 * len(order), 40))
        axes = figure.add_subplot()
        axes.imshow(grid, cmap=ListedColormap([to_rgb(_CELL_COLOURS[c]) for c in CELLS]), vmin=-0.5,
                    vmax=len(CELLS) - 0.5, aspect="auto", interpolation="nearest")
        if len(order) <= ROWS_NAMED:
            axes.set_yticks(range(len(order)), [str(i + 1) for i in range(len(order))], fontsize=6)
        else:
            axes.set_yticks([])
            axes.set_ylabel(f"{len(order)} students, grouped by pattern")
        title = "Students by build step (public case)"
    axes.set_xticks(range(len(steps)), steps, rotation=40, ha="right", fontsize=8)
    axes.set_title(title, fontsize=9)
    legend = "; ".join(f"{c}: {_CELL_COLOURS[c]}" for c in CELLS)
    return _image(figure, f"{title}. Colours: {legend}", kind="png")


def heat_map_order(questions: list[Question], students: list[str]) -> list[str]:
    """The heat map's rows: students grouped by their pattern of verdicts, then by name."""
    return sorted(students, key=lambda s: ([CELLS.index(q.cells[s]) for q in questions], s))


def late_chart(late: list[Late], anonymous: bool, threshold: int) -> str:
    """Late submissions of each assignment by day after its deadline (day 1: up to 24 hours late)."""
    figure = _figure(6.5, 3.0, left=0.7, bottom=0.6)
    axes = figure.add_subplot()
    days = sorted({d for x in late for d in x.days.values() if d > 0}) or [1]
    width = 0.8 / max(len(late), 1)
    for i, x in enumerate(late):
        counts = [sum(d == day for d in x.days.values()) for day in days]
        counts = [n if not anonymous or n >= threshold else 0 for n in counts]
        axes.bar([day + (i - (len(late) - 1) / 2) * width for day in days], counts, width=width, label=x.assignment)
    axes.set_xticks(days, [f"day {d}" for d in days])
    axes.set_xlabel("days after the deadline (and its grace)")
    axes.set_ylabel("late submissions")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.legend(fontsize=7)
    axes.set_title("Late submissions over time", fontsize=9)
    text = "; ".join(f"{x.assignment}: " + ", ".join(f"day {d} {shown(n, anonymous, threshold)}" for d, n in sorted(
        Counter(v for v in x.days.values() if v > 0).items())) for x in late)
    return _image(figure, f"Late submissions by day after the deadline. {text}")


# ---- the page -------------------------------------------------------------------------------

_STYLE = ("body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em} table{border-collapse:collapse;"
          "margin:0.5em 0} td,th{border:1px solid #ccc;padding:3px 8px;vertical-align:top;text-align:left} "
          "td.n{text-align:right} .who{font-size:85%;color:#444} img{max-width:100%} "
          "code{background:#f4f4f4;padding:0 3px} details summary{cursor:pointer}")


def _e(text) -> str:
    """Any text for the page: cleaned of control characters and escaped (names and ids are data)."""
    return html.escape(gradebook.clean(str(text)), quote=True)


def page(report: Report, anonymous: bool = False, threshold: int = THRESHOLD, term: str = "") -> str:
    n = len(report.students)
    copy = (f"anonymised copy: no names; groups of fewer than {threshold} students shown as \"fewer than "
            f"{threshold}\" and left out of the pictures" if anonymous else "instructor's copy: holds student names")
    parts = ["<!doctype html><html lang='en'><meta charset='utf-8'>", f"<title>Class report{_e(term)}</title>",
             f"<style>{_STYLE}</style>", f"<h1>Class report{_e(term)}</h1>",
             f"<p>{n} students; {_e(copy)}. Every number comes from the grading store.</p>"]

    def who(students: list[str]) -> str:
        if anonymous or not students:
            return ""
        return f"<details class='who'><summary>who</summary><ul>{''.join(f'<li>{_e(s)}</li>' for s in students)}</ul></details>"

    def count(students: list[str], named: bool = True) -> str:  # a group's size, and who (named=False: size only)
        return f"<td class='n'>{_e(shown(len(students), anonymous, threshold))}{who(students) if named else ''}</td>"

    by_assignment: dict[str, list[Question]] = {}
    for q in report.questions:
        by_assignment.setdefault(q.assignment, []).append(q)
    for a, questions in by_assignment.items():
        parts.append(f"<h2 id='{_e(a)}'>{_e(a)}</h2>")
        if a == BUILD_TRACK:
            parts.append("<figure>" + heat_map(questions, report.students, anonymous, threshold) +
                         "<figcaption>Each build step's public case: green passed, purple failed with a named mistake, "
                         "red failed with none named, orange error, grey not attempted, light grey not submitted."
                         "</figcaption></figure>")
            if not anonymous and len(report.students) <= ROWS_NAMED:
                parts.append("<details class='who'><summary>the heat map's rows, by number</summary><ol>" +
                             "".join(f"<li>{_e(s)}</li>" for s in heat_map_order(questions, report.students)) +
                             "</ol></details>")
        for q in questions:
            parts.append(f"<h3>{_e(q.question)}</h3><table><tr><th>verdict</th>" +
                         "".join(f"<th>{_e(case)} case ({q.points[case]:g} pts)</th>" for case in q.verdicts) + "</tr>")
            for status in STATUSES:
                parts.append(f"<tr><td>{_e(status)}</td>" + "".join(count(q.verdicts[case][status]) for case in q.verdicts)
                             + "</tr>")
            parts.append("</table><table><tr><th>mistake (identifier)</th><th>students</th></tr>")
            for m, students in q.mistakes.items():
                parts.append(f"<tr><td><code>{_e(m)}</code></td>{count(students)}</tr>")
            parts.append(f"<tr><td>failed, no mistake named</td>{count(q.unnamed)}</tr>")
            parts.append(f"<tr><td>did not attempt it</td>{count(q.not_attempted)}</tr></table>")
            drawn = {m: len(s) for m, s in q.mistakes.items() if not anonymous or len(s) >= threshold}
            if drawn:
                parts.append(bar_chart(list(drawn), list(drawn.values()), f"{a}: {q.question}, mistakes by frequency",
                                       "students who made it"))
    if report.late:
        parts.append("<h2>Late submissions</h2>" + late_chart(report.late, anonymous, threshold))
        parts.append("<table><tr><th>assignment</th><th>deadline</th><th>submitted</th><th>late</th></tr>")
        for x in report.late:
            late = [s for s, d in x.days.items() if d > 0]
            parts.append(f"<tr><td>{_e(x.assignment)}</td><td>{_e(x.deadline.isoformat())}</td>"
                         f"{count(list(x.days), named=False)}{count(late)}</tr>")
        parts.append("</table>")
    return "\n".join(parts) + "\n</html>\n"


def write(grades: Path, book: gradebook.Book, threshold: int = THRESHOLD) -> list[Path]:
    """Write the two pages and the two CSVs into OUT/grades from its store; their paths."""
    if not (grades / "results").is_dir():
        raise ValueError(f"{grades / 'results'} does not exist: grade the class first")
    if not isinstance(threshold, int) or threshold < 2:
        raise ValueError(f"threshold must be a whole number >= 2, got {threshold!r}")
    store = load_results(grades / "results")
    if not store:
        raise ValueError(f"{grades / 'results'}: holds no student's results (<student>.json): grade the class first")
    report = analyse(store, book)
    files = {"report.html": page(report, False, threshold), "report-anonymous.html": page(report, True, threshold),
             "report.csv": gradebook._csv(rows(report)),
             "report-anonymous.csv": gradebook._csv(rows(report, True, threshold))}
    for name, text in files.items():
        gradebook.write_atomically(grades / name, text)
    return [grades / name for name in files]
