"""A capture file's JSON as one document, whichever layout it has: a recording's
chunks merged (``livesym.capture.unchunk``, the reader's own step), or a whole
document as it is; gzip or not. Tests look at the fields a capture holds, not at
how a recording appended them (tests/unit/test_chunks.py does that)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from livesym.capture.unchunk import is_chunked, merged


def capture_json(path: str | Path) -> dict[str, Any]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if is_chunked(raw):
        doc, torn = merged(raw)
        assert not torn, f"{path}: its last chunk is cut short"
        return doc
    doc = json.loads(raw)
    assert isinstance(doc, dict)
    return doc
