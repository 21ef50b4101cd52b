"""What runs inside a submission's sandbox: of the course kit, the sandbox holds this package alone.

    zygote.py         the sandbox's first process (PID 1): imports torch, IPython and gptlib once, forks a
                      process per submission, runs its cells and answers the judge's requests
    remote_module.py  the submission's half of a module's mirror, and the mirror's protocol
    plain.py          a submission's values as the plain data the judge reads

The host side (the bwrap command line and the judge's client of the zygote: sandbox.py; the judge's half
of the mirror: remote_module.py) may import from here; nothing here imports the rest of gptlib_course
(tests/project/test_architecture.py), so the sandbox needs nothing else of the kit. The sandbox holds this
folder, read-only, at /kit/gptlib_course/inside (/kit on its PYTHONPATH) and starts
`python -P -m gptlib_course.inside.zygote` (sandbox.py).
"""
