"""Content-addressed chunk store (farm-exec's minimal local version; the lead takes farm-data's on merge)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


class ChunkStore:
    def __init__(self, root: str):
        self.root = str(root)
        Path(root).mkdir(parents=True, exist_ok=True)

    def path_for(self, key) -> str:
        return os.path.join(self.root, f"{key}.mp4")

    def has(self, key: str) -> bool:
        return os.path.isfile(self.path_for(key))

    def publish(self, key: str, local_file: Path) -> str:
        dest = self.path_for(key)
        if not os.path.isfile(dest):
            tmp = dest + f".tmp{os.getpid()}"
            shutil.copyfile(local_file, tmp)
            os.replace(tmp, dest)
        return dest

    def fetch(self, key: str, dest: Path) -> Path:
        shutil.copyfile(self.path_for(key), dest)
        return Path(dest)
