"""fvconsole: the operations console for FastVideo training runs."""

__version__ = "0.1.0"
