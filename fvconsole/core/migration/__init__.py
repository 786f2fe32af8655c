"""Legacy checkpoint migration: plan → preview → execute → result, and verify.

The modules, in the order a migration uses them:

- :mod:`.plan`: the request, refusals, the plan and the dry-run preview (reads, never writes);
  :mod:`.inputs` reads and checks the run config and the checkpoint for it.
- :mod:`.output_dir`: every rule about the output dir (the preview uses them, execution
  re-checks them), its lock and the staging dirs beside it.
- :mod:`.write`: execution (staging, lock, atomic writes); :mod:`.publish` (the rename or
  swap and the read-back); :mod:`.receipt` (the commit marker); :mod:`.files` (file names,
  reading a sidecar back).
- :mod:`.verify`: a written set against the plan recomputed from the sources;
  :mod:`.sample_ids` (each rank's next sample id, for ``verify --deep`` and the console).
- :mod:`.faults`: the test-only fault hook (kill or pause at a file-system step).

The cursor arithmetic itself is :mod:`fvconsole.core.streaming`.
"""
