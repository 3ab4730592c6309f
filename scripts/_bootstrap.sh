# Sourced by the scripts: find Python >= 3.12, create .venv if missing, install the project.
# Usage: . scripts/_bootstrap.sh EXTRA   (EXTRA: "test" installs the test dependencies too, "demo"
# the demo's (the SDK clients), "" nothing more; always give it: sourcing with no argument passes
# the caller's own arguments)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRA="${1:-}"

find_python() {
    local c v
    for c in "${THINKWIRE_PYTHON:-}" python3.14 python3.13 python3.12 python3 python \
             "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do
        [ -n "$c" ] || continue
        command -v "$c" >/dev/null 2>&1 || [ -x "$c" ] || continue
        v=$("$c" -c 'import sys; print(int(sys.version_info >= (3, 12)))' 2>/dev/null) || continue
        if [ "$v" = 1 ]; then command -v "$c" 2>/dev/null || echo "$c"; return 0; fi
    done
    return 1
}

if [ ! -x "$VENV/bin/python" ]; then
    PY=$(find_python) || {
        echo "thinkwire needs Python 3.12 or newer (mitmproxy 12 requires it), and none was found." >&2
        echo "Install one (e.g. 'pyenv install 3.12' or your system's python3.12 package)," >&2
        echo "or point THINKWIRE_PYTHON at its interpreter, then run this again." >&2
        exit 1
    }
    echo "thinkwire: creating $VENV with $PY" >&2
    "$PY" -m venv "$VENV"
fi

# Reinstall only when the project's metadata or its C part changed since the last install (an
# install with the test extra holds everything the demo's and a plain one do). The install builds
# the C part (thinkwire._hot) in place; where it cannot, thinkwire runs on Python alone.
STAMP="$VENV/.thinkwire-installed${EXTRA:+-$EXTRA}"
fresh() {
    [ -f "$1" ] || return 1
    local f
    for f in pyproject.toml setup.py addon/thinkwire/_hot.c; do
        [ ! "$ROOT/$f" -nt "$1" ] || return 1
    done
}
if ! fresh "$STAMP" && ! { [ "$EXTRA" != test ] && fresh "$VENV/.thinkwire-installed-test"; }; then
    echo "thinkwire: installing dependencies into $VENV" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    "$VENV/bin/python" -m pip install -q -e "$ROOT${EXTRA:+[$EXTRA]}" >&2
    touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
