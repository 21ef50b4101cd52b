"""Figures (pure functions returning matplotlib Figures) and the explorers (anywidgets drawn in the page).

Imported only on demand: `import gptlib` never loads matplotlib, ipywidgets or anywidget.
"""
