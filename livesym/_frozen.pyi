# livesym/_frozen.c's interface; livesym.frozen uses it.
from collections.abc import Mapping
from typing import Any

class Maker:
    def __init__(
        self, cls: type, names: tuple[str, ...], defaults: Mapping[str, Any], /
    ) -> None: ...
    def __call__(self, *values: object) -> Any: ...
