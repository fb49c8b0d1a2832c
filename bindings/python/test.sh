#!/usr/bin/env bash
# Builds the Python binding into a virtual environment under the cargo
# target directory and runs its pytest suite: the second half of the
# README's test command, which CI (.ci/run) runs after `cargo test
# --workspace`. Needs python3 (3.9 or newer) with its venv module, a Rust
# toolchain, and the package registry for maturin, pytest and hypothesis.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/python-venv"

if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
# maturin's build backend runs the `maturin` command of the environment.
export PATH="$venv/bin:$PATH"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin>=1.5,<2" "pytest>=7" "hypothesis>=6"
# The same `pip install` a user runs, on the dev profile (opt-level 1):
# the tests need no release build, which takes about twice as long. The
# binding has its own target directory beside the workspace's (it is not
# a workspace member: docs/python.md, "Building").
CARGO_TARGET_DIR="$target/python" MATURIN_PEP517_ARGS="--profile dev" \
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-build-isolation --force-reinstall --no-deps "$here"
cd "$here"
"$venv/bin/python" -m pytest -q tests
