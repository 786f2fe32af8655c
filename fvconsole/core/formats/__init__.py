"""The file formats fvconsole reads without torch, each bounded in time and memory: pickles
(:mod:`.inert_pickle`, :mod:`.pickle_shape`, :mod:`.torch_zip`), the run config
(:mod:`.runconfig`, :mod:`.bounded_yaml`) and its values typed and checked (:mod:`.run_params`),
the dataset manifest (:mod:`.manifest`, :mod:`.fastjson`, :mod:`.parquet_columns`) and what
FastVideo's loader does with its columns at resume (:mod:`.column_check`), FastVideo's streaming cursor (:mod:`.streaming`)
and the names of a sidecar set (:mod:`.sidecar_files`). docs/formats.md describes each.
Imports only the shared layer.
"""

from __future__ import annotations

from fvconsole.core.formats.runconfig import (
    CRITICAL_PATHS,
    Mismatch,
    RunConfig,
    compare_configs,
    get_path,
    load_run_config,
)

__all__ = [
    "CRITICAL_PATHS",
    "Mismatch",
    "RunConfig",
    "compare_configs",
    "get_path",
    "load_run_config",
]
