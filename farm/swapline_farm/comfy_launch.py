"""Runs a farm worker's ComfyUI (its main.py) so that it dies with the worker's actor.

ComfyProcess starts `python comfy_launch.py PARENT_PID main.py ARGS...` in the ComfyUI folder, with
subprocess's start_new_session=True: a session and process group of its own, which stop() and kill()
signal as a whole. The actor is a threaded Ray process, so nothing may run between fork and exec
there (subprocess's preexec_fn can deadlock in a threaded parent); and PR_SET_PDEATHSIG would follow
the thread that started the child, not the process, killing ComfyUI when that thread ends while the
actor lives on, and never reaching what ComfyUI itself started. So the watching happens here, in
the fresh single-threaded child: a daemon thread polls os.getppid() and, once the actor is gone
however it died (SIGKILL included: the child is re-parented), SIGKILLs the whole group -- this
ComfyUI and everything it started. Then main.py runs in this same process as __main__, so the pid
the actor holds and signals is ComfyUI's own.

Standard library only: it runs under whatever python the worker starts ComfyUI with.
"""
import sys

if __name__ == "__main__":
    del sys.path[0]          # this script's folder is the farm package, not a place to import from

import os  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

POLL_S = 0.25


def _kill_group() -> None:
    # the group is ours only when we lead it (started with start_new_session); else just this process
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def watch_parent(parent: int, poll_s: float = POLL_S) -> None:
    """Return never: SIGKILL this process group once `parent` is no longer this process's parent."""
    while os.getppid() == parent:
        time.sleep(poll_s)
    try:
        sys.stderr.write(f"swapline-farm: the worker process {parent} is gone; stopping this ComfyUI\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    _kill_group()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        sys.exit("usage: comfy_launch.py PARENT_PID SCRIPT [ARGS...]")
    parent, script, args = int(argv[0]), argv[1], argv[2:]
    if os.getppid() != parent:          # the actor died before we got here
        _kill_group()
    threading.Thread(target=watch_parent, args=(parent,), name="swapline-farm-parent-watch", daemon=True).start()
    sys.argv = [script, *args]          # as `python main.py ARGS...` would see it
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
