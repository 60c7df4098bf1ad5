#!/usr/bin/env bash
# Create bench/peers/.venv and install requirements.txt into it.
#
# The peers (Pydantic AI, LangGraph) live in their own virtualenv so they never become a
# dependency of dbos-agents or disturb its pins. Idempotent: the sha256 of requirements.txt
# is stamped into the venv after a successful install, so a second call returns at once.
#
#   bash bench/peers/setup.sh            # PYTHON=python3.11 by default
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"

want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
rm -f "$stamp"
"$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$req" 1>&2
echo "$want" >"$stamp"
echo "bench/peers: installed requirements.txt into $venv" 1>&2
