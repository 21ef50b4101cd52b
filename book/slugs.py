"""Heading anchors as JupyterLab writes them, for the book's myst_heading_slug_func."""


def jupyterlab_slug(heading: str) -> str:
    """JupyterLab's id for a Markdown heading: its text with each space replaced by '-'."""
    return heading.replace(" ", "-")
