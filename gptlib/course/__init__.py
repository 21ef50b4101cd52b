"""The course kit: the exercise notebooks as assignments a class can be graded on.

    python -m gptlib.course assign   build/course from notebooks/: student notebooks, public and hidden tests
    python -m gptlib.course grade    a folder of submissions -> a feedback page per student and the gradebook's
                                     exports (grades.csv, canvas.csv, gradescope/); --student NAME regrades one

One source: the questions are the `exercises.check_*(...)` calls the notebooks already make
(questions.py), and every test is that call, run by gptlib's own checker (cases.py): on the
public points, and for the hidden variant with every random draw of the checker moved by a
secret offset (variants.py). Grading (grade.py) runs each submission's code in its own confined
process (sandbox.py) and the checkers in a trusted judge (judge.py) that only calls the
submission's functions through a pipe: the submission never sees a test, a secret or another
student's file, and cannot change how it is judged. Points, weights, deadlines and the late
policy are in one file the instructor edits (gradebook.py). Docs: docs/teaching.md.

This lives inside gptlib because the student's half (`grader.check`, cases.py) must be importable
in every student's kernel, which has gptlib installed and nothing else of this repository;
the hidden tests never ship with it: `assign` writes them only into the instructor's folder.
Importing gptlib does not import this package.
"""
