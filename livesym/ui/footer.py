"""The footer, rebuilt only when the keys it shows change.

Textual's Footer recomposes itself (a dozen widgets removed, mounted, styled
and laid out) on every change of the screen's bindings, and focus moving from
one table to another is such a change even when the footer would show the
same keys. On a big profile that made Tab cost twice what it should.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[tuple[str, str, str, bool, str], ...]


def shown_keys(screen: Screen[object]) -> Shown:
    """What the footer would show for ``screen``'s bindings now."""
    return tuple(
        (binding.key, binding.action, binding.description, enabled, tooltip)
        for _node, binding, enabled, tooltip in screen.active_bindings.values()
        if binding.show
    )


class KeysFooter(Footer):
    """A footer that recomposes only when its keys differ from the ones it shows."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: Shown | None = None

    def bindings_changed(self, screen: Screen[object]) -> None:
        keys = shown_keys(screen)
        if keys == self._shown:
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self._shown = keys  # a recompose is on its way
