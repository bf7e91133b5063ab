#!/usr/bin/env bash
# Runs once when the dev container (a GitHub Codespace, or VS Code's Dev Containers) is created:
# PyTorch's CPU-only build first, then the course and its grader (editable, so the learner's
# exercises/ are graded in place), so `autograder grade` and `autograder viewer` work as soon
# as the terminal opens.
#
# Settings, from the environment (tests/test_devcontainer.py uses both):
#   PYTHON           the interpreter to install into (default: python3 on PATH)
#   TORCH_INDEX_URL  where PyTorch comes from (default: PyTorch's CPU-only index); set it empty
#                    to use pip's own configuration instead (a local mirror, a wheel folder)
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-python3}"
torch_index="${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}"

# The exact PyTorch that pyproject.toml pins ("torch==X.Y.Z"): one place to change it.
torch_pin=$("$python" -c 'import re, sys; print(re.search(r"\"(torch==[^\"]+)\"", open("pyproject.toml", encoding="utf-8").read())[1])')

echo "post-create: $torch_pin (CPU) ..."
if [ -n "$torch_index" ]; then
    "$python" -m pip install --no-input "$torch_pin" --index-url "$torch_index"
else
    "$python" -m pip install --no-input "$torch_pin"
fi
# PyTorch is now satisfied, so this does not fetch the (much larger) CUDA build from PyPI.
echo "post-create: the course (pip install -e .) ..."
"$python" -m pip install --no-input -e .

"$python" -m autograder --version
"$python" -c 'from autograder.core import i18n; from autograder.core.manifest import load_course
print(i18n.translate("viewer.devcontainer_ready", load_course("course.yml").language))'
