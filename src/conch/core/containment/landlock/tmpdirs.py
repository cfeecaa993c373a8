"""Each landlock job's own TMPDIR, inside the data dir (no private /tmp there)."""

from __future__ import annotations

import os
import shutil
import tempfile


class TempDirs:
    """Each job's own TMPDIR under the landlock backend (no private /tmp there): inside the
    data dir, so no other job sees it; removed when the job is done, all at close."""

    def __init__(self, data_dir: str, instance: str) -> None:
        self.root = os.path.join(data_dir, "tmp", instance)

    def make(self, name: str) -> str:
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:40]
        return tempfile.mkdtemp(prefix=f"{safe}.", dir=self.root)

    @staticmethod
    def remove(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.root))
        except OSError:
            pass
