"""An accessibility audit with axe-core (vendored: tests/support/browser/vendor/axe.min.js, axe-core 4.14.1,
MPL-2.0, from npm's axe-core package), run inside the page against WCAG 2.0/2.1 A and AA."""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).with_name("vendor") / "axe.min.js"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


def violations(page, include: list[str] | None = None, exclude: list[str] = ()) -> list[str]:
    """What axe finds in the page (or in the elements matching `include`), leaving out `exclude`,
    one line per rule and element: 'rule (impact): selector'."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate(
        """async ([include, exclude, tags]) => {
            const context = {exclude: exclude.map(s => [s])};
            if (include) context.include = include.map(s => [s]);
            const result = await axe.run(context, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
            return result.violations.flatMap(v => v.nodes.map(n => `${v.id} (${v.impact}): ${n.target.join(' ')}`));
        }""",
        [include, list(exclude), WCAG],
    )
    return found
