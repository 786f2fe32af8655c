"""fvconsole benchmarks: ``python -m benchmarks [--quick]``.

Each case generates its inputs in a temp dir, times fvconsole's code path and a baseline
(the upstream approach it replaces, or the OS floor such as ``du -sb``) on the same machine
in the same run, and reports the ratio. Nothing here is imported by fvconsole itself.
"""
