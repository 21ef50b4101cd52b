"""What a learner is asked to find: the reference solutions (solutions.py), the build track's reference
classes (build.py, notebook 09) and the concept questions with their answers (concepts.py).

Self-study installs keep this folder: `exercises.show_solution(n)` and `exercises.concept_answer(id)`
read it. A class's student image does not have it (course/hub/Dockerfile deletes it after building
the assignments), grading hides it from every submission's process, and nothing outside this folder
imports it at import time: without it `import gptlib` works, concept questions are checked from the
sealed records a release ships (checking/sealed.py) and the two functions above say the answers stay
with the instructor.
"""
