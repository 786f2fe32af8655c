"""Which roots eviction refuses, and which caps and durations are accepted."""

from __future__ import annotations

import os
import pwd

import pytest
from cache_roots import dangerous_root_reason

from fvconsole.core.cache import parse_max_gb
from fvconsole.core.cache.selectors import ENV_MAX_GB, default_max_gb
from fvconsole.core.shared import parse_duration
from fvconsole.core.shared.errors import FvError, UsageError

REAL_HOME = os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)


@pytest.mark.parametrize("home_env", [None, "/nonexistent-home", ""])
def test_real_home_and_its_parents_are_refused_whatever_HOME_says(monkeypatch, home_env):
    if home_env is None:
        monkeypatch.delenv("HOME", raising=False)
    else:
        monkeypatch.setenv("HOME", home_env)
    for force in (False, True):
        assert "home directory" in dangerous_root_reason(REAL_HOME, True, force)
        parent = os.path.dirname(REAL_HOME)
        assert dangerous_root_reason(parent, True, force) is not None  # "/" or e.g. /home


def test_HOME_is_refused_too(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    (tmp_path / "me").mkdir()
    assert "home directory" in dangerous_root_reason(str(tmp_path / "me"), True, True)
    assert "contains the home directory" in dangerous_root_reason(str(tmp_path), True, True)
    assert dangerous_root_reason(str(tmp_path / "me" / "cache"), True, True) is None  # below it is fine


@pytest.mark.parametrize("root", ["/etc", "/etc/ssh", "/usr", "/usr/local/lib", "/proc/self", "/sys/kernel",
                                  "/boot", "/bin", "/sbin", "/lib", "/var", "/tmp", "/dev", "/run", "/opt"])
def test_system_directories_are_refused_even_with_force(root):
    reason = dangerous_root_reason(os.path.realpath(root), True, force=True)
    assert reason is not None and "system directory" in reason


@pytest.mark.parametrize("root", ["/tmp/fastvideo-wcache", "/var/tmp/wcache", "/dev/shm/fastvideo-wcache",
                                  "/scratch/wcache"])
def test_ordinary_cache_roots_are_allowed_with_force(root):
    assert dangerous_root_reason(root, True, force=True) is None


@pytest.mark.parametrize("text", ["1e308", "1e19", "1073741825", "9" * 5000, "inf", "-inf", "nan", "-1", "x", ""])
def test_bad_caps_are_usage_errors_and_environment_refusals(monkeypatch, text):
    with pytest.raises(UsageError, match="--max-gb") as flag_error:
        parse_max_gb(text)
    assert len(str(flag_error.value)) < 200
    monkeypatch.setenv(ENV_MAX_GB, text)
    if text:
        with pytest.raises(FvError, match=ENV_MAX_GB):
            default_max_gb()


@pytest.mark.parametrize("text, gb", [("0", 0.0), ("-0", 0.0), ("1073741824", 2.0**30), ("0.5", 0.5), ("1e-400", 0.0)])
def test_sane_caps_are_accepted(text, gb):
    value = parse_max_gb(text)
    assert value == gb and str(value) != "-0.0"


@pytest.mark.parametrize("text", ["36524d", "5217w", "876600h"])
def test_durations_up_to_a_century_are_accepted(text):
    assert parse_duration(text) <= 100 * 365.25 * 86400


@pytest.mark.parametrize("text", ["36526d", "99999999999w", "9" * 400 + "s"])
def test_longer_durations_are_usage_errors(text):
    with pytest.raises(UsageError, match="too large") as info:
        parse_duration(text, "--older-than")
    assert "--older-than" in str(info.value) and len(str(info.value)) < 200
