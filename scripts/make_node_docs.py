"""Write web/docs/<NodeId>.md for every Swapline node from a real server's /object_info, so the
editor's node docs always match the node definitions (description, inputs with tooltips, outputs).
    .venv/bin/python scripts/make_node_docs.py
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))          # devtools, swapline_core

EXTRA = {
    "SwaplineC2PASink": (
        "## Signing credentials\n\n"
        "Put `signing.json` in ComfyUI's user folder under `swapline/` (`user/swapline/signing.json`):\n\n"
        "```json\n{\"cert_chain\": \"chain.pem\", \"private_key\": \"key.pem\", \"algorithm\": \"es256\"}\n```\n\n"
        "Paths are relative to the config file. The leaf certificate must be issued by a CA (not "
        "self-signed) and carry AuthorityKeyIdentifier, keyUsage digitalSignature and EKU "
        "emailProtection. Without a config a local development certificate is generated in "
        "`user/swapline/dev-signer/` and the output says so. Keys are never logged or embedded.\n\n"
        "## When signing fails\n\n"
        "A bad or expired certificate, a key that does not match it, a c2pa error or a read-back that "
        "does not verify leaves the output as `<name>_UNSIGNED.<ext>` and a line in the audit log. With "
        "`on_signing_failure` = `fail` (the shipped workflows) or `require_trusted_signer` on, the job "
        "then fails with the reason. `require_trusted_signer` also needs `trust_anchors` in "
        "`signing.json`, so the signature can be verified as Trusted.\n\n"
        "## What the manifest states\n\n"
        "One `c2pa.edited` action per stage that made pixels: the classical landmark warp "
        "(`compositeSynthetic`) or the trained swapper family, restorer and diffusion refine "
        "(`compositeWithTrainedAlgorithmicMedia`), and in `swapline.qa` every stage (analysis, swap, "
        "masks, restore, refine) with each model's file, sha256 and licence, plus the face model's "
        "consent attestation when it has one.\n"),
    "SwaplineCacheStatus": (
        "## Retention policy\n\n"
        "`user/swapline/retention.json` (all keys optional; these are the defaults):\n\n"
        "```json\n{\"cache\": {\"max_age_days\": 7, \"max_size_gb\": 20},\n"
        " \"outputs\": {\"max_age_days\": null, \"max_size_gb\": null},\n"
        " \"lease_hours\": 24, \"min_idle_minutes\": 30}\n```\n\n"
        "Applied at server start and after every job's output node. Output retention (whole jobs, "
        "with a tombstone in the audit log) is off unless you set a limit. The same report and sweep "
        "are served at `GET /swapline/cache` and `POST /swapline/cache/sweep`.\n"),
}


def render(node_id: str, spec: dict) -> str:
    lines = [f"# {spec['display_name']}", "", spec["description"], "", "## Inputs", "",
             "| input | type | description |", "| --- | --- | --- |"]
    for group in ("required", "optional"):
        for name, value in spec["input"].get(group, {}).items():
            kind = value[0] if isinstance(value[0], str) else "COMBO"
            opts = value[1] if len(value) > 1 else {}
            tip = opts.get("tooltip", "").replace("|", "\\|")
            lines.append(f"| `{name}`{' (optional)' if group == 'optional' else ''} | {kind} | {tip} |")
    lines += ["", "## Outputs", "", "| output | type |", "| --- | --- |"]
    lines += [f"| `{n}` | {t} |" for n, t in zip(spec["output_name"], spec["output"])]
    if node_id in EXTRA:
        lines += ["", EXTRA[node_id]]
    return "\n".join(lines) + "\n"


def main() -> int:
    from devtools.comfy_harness import ComfyServer

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "models").mkdir()
        server = ComfyServer(Path(tmp) / "base", Path(tmp) / "models").start()
        try:
            info = server.object_info()
        finally:
            server.stop()
    docs = REPO / "web" / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for node_id, spec in sorted(info.items()):
        if node_id.startswith("Swapline"):
            (docs / f"{node_id}.md").write_text(render(node_id, spec))
            print("wrote", node_id)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
