"""Pure aggregation of symbolized samples into frozen views (DESIGN.md's ``profile/``).

``aggregate`` counts samples by function, module and thread and makes the views
the dashboard and the commands read; ``calltree`` reads a view's stacks as trees
(top-down, inverted, a function's callers and callees); ``stack_counts`` counts by stack and frame
record for the hot addresses of one function. Nothing here reads a clock, does
I/O or knows about asyncio.
"""

from livesym.profile.aggregate import (
    FunctionRow,
    FunctionRows,
    ModuleRow,
    ProcessRow,
    Profile,
    ProfileView,
    StackSample,
    ThreadRow,
)
from livesym.profile.calltree import DOWN, UP, Neighbours, StackNode
from livesym.profile.stack_counts import HotAddress, StackCounts

__all__ = [
    "DOWN",
    "UP",
    "FunctionRow",
    "FunctionRows",
    "HotAddress",
    "ModuleRow",
    "Neighbours",
    "ProcessRow",
    "Profile",
    "ProfileView",
    "StackCounts",
    "StackNode",
    "StackSample",
    "ThreadRow",
]
