"""Modules the tests import that are not tests themselves: scratch models, notebook lists, the portability runner."""
