#!/usr/bin/env bash
# Install what the fleet tests need for a real single-host Slurm cluster (Debian packages
# slurm-wlm and munge). Idempotent and quick when already installed; never fails CI:
# without root or apt the Slurm tests skip with a reason instead.
set -u
if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
    && command -v srun >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then
    echo "setup-slurm: slurm-wlm and munge already installed"
    exit 0
fi
if [ "$(id -u)" != "0" ]; then
    echo "setup-slurm: not root; cannot install slurm-wlm and munge (Slurm tests will skip)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup-slurm: apt-get not available (Slurm tests will skip)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null; then
    echo "setup-slurm: installed slurm-wlm and munge"
else
    echo "setup-slurm: apt-get install slurm-wlm munge failed (Slurm tests will skip)"
fi
exit 0
