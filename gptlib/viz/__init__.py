"""Figures (pure functions returning matplotlib Figures) and ipywidgets explorers.

Imported only on demand: `import gptlib` never loads matplotlib or ipywidgets.
"""
