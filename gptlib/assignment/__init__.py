"""The student's half of the course kit: what a released assignment imports in the student's kernel.

    grader.py    `grader = Notebook("tests")`; grader.check("NAME"), check_all(), export()
    cases.py     the test files' format (tests/NAME.py: cases with points and `hidden`), read by
                 grader.check and by the instructor's judge

The instructor's half (assignments, the judge, the sandbox, the gradebook: `python -m gptlib_course`)
is its own package, gptlib_course (course/ in the repository, installed by instructors); a student's
environment has gptlib alone. Importing gptlib does not import this package, and nothing here
imports gptlib_course.
"""
