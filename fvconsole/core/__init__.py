"""The core library shared by the CLI and the TUI.

Nothing under ``fvconsole.core`` may import Textual or Rich (a test enforces it), and
nothing may import torch or pyarrow at module level: those are imported lazily inside
the functions that need them, so ``fvconsole --help`` and ``cache ls`` start fast.
"""
