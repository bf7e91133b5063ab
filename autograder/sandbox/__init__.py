"""The trust boundary: everything between the trusted grading process and the learner's code.

Owns: the trusted side's handle on one worker (client.py: start, requests, CPU-time limits,
kill), the warm zygote that forks walled workers (pool.py), the wire protocol (protocol.py),
what walls to ask for and what a result says was enforced (isolation.py), reading a
submission without following a link out of it (intake.py), CPU time per process
(cpu_clock.py), the spawned worker of macOS and Windows (portable.py), and the worker itself
(worker/: supervisor, Landlock, seccomp, namespaces; it imports only itself and protocol.py).

May import: core.
"""
