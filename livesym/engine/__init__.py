"""The engine (DESIGN.md's ``engine/``): the asyncio hub and the session's tables.

``hub`` runs the loop and routes batches; ``tables`` keeps the session as a
capture stores it; ``live`` and ``recorded`` are the two sides a session can
observe (a running target, a capture replayed), behind ``side.TargetSide``.
"""

from livesym.engine.hub import QUIET_TICK, RECORD_TICK, Engine, replay_snapshot, tick_for
from livesym.engine.snapshot import EngineSnapshot
from livesym.profile.stack_counts import HotAddress

__all__ = [
    "QUIET_TICK",
    "RECORD_TICK",
    "Engine",
    "EngineSnapshot",
    "HotAddress",
    "replay_snapshot",
    "tick_for",
]
