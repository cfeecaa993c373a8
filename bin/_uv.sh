# Sourced by bin/conch and bin/test: finds uv, or installs it into .uv-bootstrap/ with pip.
# Everything it prints goes to stderr, so stdout stays clean for the stdio MCP protocol.
conch_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if command -v uv >/dev/null 2>&1; then
  UV="$(command -v uv)"
elif [ -x "$conch_root/.uv-bootstrap/bin/uv" ]; then
  UV="$conch_root/.uv-bootstrap/bin/uv"
else
  echo "conch: uv not found; installing it into $conch_root/.uv-bootstrap" >&2
  python3 -m venv "$conch_root/.uv-bootstrap" >&2 &&
    "$conch_root/.uv-bootstrap/bin/pip" install -q uv >&2 ||
    { echo "conch: could not install uv (python3 -m venv / pip failed)" >&2; exit 1; }
  UV="$conch_root/.uv-bootstrap/bin/uv"
fi
export UV
