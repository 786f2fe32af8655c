"""fvconsole: the operations console for FastVideo training runs."""

#: The source tree's version (pyproject.toml's, checked by tests/architecture/test_fresh_venv.py).
__version__ = "0.1.0"


def installed_version() -> str:
    """The installed distribution's version (importlib.metadata), else the source tree's.

    What ``fvconsole --version`` prints: for a wheel or pipx install it is what pip installed.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fvconsole")
    except PackageNotFoundError:  # run from a source checkout that is not installed
        return __version__
