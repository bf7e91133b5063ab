"""The trust boundary: everything between the trusted grading process and the learner's code.

Owns: the trusted side's handle on one worker (client.py: the Sandbox, its requests, CPU-time
limits, kill), who that worker runs as and what it may do (privileges.py: `nobody` under a root
grader, RLIMIT_NPROC, no memory cap beside a GPU), how it is started (starters.py: forked by the
warm pool's zygote, executed in a fresh interpreter, or spawned on the portable path), the bytes
to and from it (channel.py: one class per kind of connection, the same methods), the warm
zygote that forks walled workers (pool.py), the wire protocol (protocol.py),
what walls to ask for and what a result says was enforced (isolation.py), reading a
submission without following a link out of it (intake.py), CPU time per process
(cpu_clock.py), the worker's stack as faulthandler wrote it when a check ran out of time
(stack_dump.py), the spawned worker of macOS and Windows (portable.py), and the worker itself
(worker/: supervisor, Landlock, seccomp, namespaces; it imports only itself and protocol.py).

May import: core.
"""
