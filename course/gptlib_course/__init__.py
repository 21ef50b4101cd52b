"""The course kit: the exercise notebooks as assignments a class can be graded on. The instructor's
package (course/pyproject.toml, distribution gptlib-lecture5-course); a student's environment has
gptlib alone.

    python -m gptlib_course assign   build/course from notebooks/: student notebooks, public and hidden tests
    python -m gptlib_course grade    a folder of submissions -> a feedback page per student and the gradebook's
                                     exports (grades.csv, canvas.csv, gradescope/); --student NAME regrades one

One source: the questions are the `exercises.check_*(...)` calls the notebooks already make
(questions.py), and every test is that call, run by gptlib's own checker (gptlib.assignment.cases): on
the public points, and for the hidden variant with every random draw of the checker moved by a
secret offset (gptlib.checking.variants). Grading (grade.py) runs each submission's code in its own
confined process (sandbox.py, the host side; inside/, what runs in the sandbox) and the checkers in a
trusted judge (judge.py) that only calls the submission's functions through a pipe, within the time,
memory and output a submission may use (limits.py): the submission
never sees a test, a secret or another student's file, and cannot change how it is judged. Points,
weights, deadlines and the late policy are in one file the instructor edits (gradebook.py). Docs:
docs/teaching.md.

The student's half (`grader.check`, the test files' format) is gptlib.assignment, in gptlib: every
student's kernel imports it. Nothing of this package is: the hidden tests never ship with gptlib
(`assign` writes them only into the instructor's folder), and a submission's sandbox holds gptlib
and, of this package, only the package `inside` (the zygote, the submission's half of a module's
mirror), which imports nothing else of it. This package imports gptlib; gptlib never imports it
(tests/project/test_architecture.py).
"""
