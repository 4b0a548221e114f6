#!/usr/bin/env bash
# The GPU check in one command, run from anywhere (check.py's docstring says what it runs):
#   benchmarks/gpu_check/run.sh OUT [--minutes N] [--dry-run] [--python PATH] [--wheels DIR]
# It runs check.py with the machine's interpreter (--python, default python3), which needs
# nothing but the standard library to start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=python3
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
        --python) python=${args[i+1]:-python3} ;;
        --python=*) python=${args[i]#--python=} ;;
    esac
done
export PYTHONUNBUFFERED=1
exec "$python" "$here/check.py" "$@"
