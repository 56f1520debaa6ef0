"""The footer: the main keys of the screen, on one line drawn with the screen.

Textual's Footer is a dozen widgets that it recomposes (removed, mounted, styled
and laid out) after a refresh whenever the screen's bindings change, and it is
empty until then: a screen pushed by a key (details, help) showed its footer
one frame after the rest, 60 ms later on a busy terminal, and focus moving from
one table to another recomposed it even when it would show the same keys. This
footer is one line of text, ready in the screen's first frame, redrawn only when
the keys it shows change. A click on a key presses it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.screen import Screen
from textual.widget import Widget

# (key pressed, key shown, description) of each key the footer shows, in order.
Shown = tuple[tuple[str, str, str], ...]
# Kept when the line is too narrow for every key: the way out, and the way to all keys.
ESSENTIAL = ("Quit", "Help", "Back", "Close", "Close help")


def shown_keys(screen: Screen[object]) -> Shown:
    """The keys ``screen``'s bindings ask the footer to show, as they are now."""
    app = screen.app
    keys: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for _node, binding, enabled, _tooltip in screen.active_bindings.values():
        if not (binding.show and enabled) or binding.action in seen:
            continue
        seen.add(binding.action)  # one key per action, as Textual's Footer groups them
        keys.append((binding.key, app.get_key_display(binding), binding.description))
    return tuple(keys)


def width_of(keys: Shown) -> int:
    return sum(len(display) + len(description) + 3 for _, display, description in keys)


def fitting(keys: Shown, width: int) -> Shown:
    """``keys`` as they fit in ``width`` cells: the others go, last first, before any of
    the ESSENTIAL ones (a narrow terminal still shows how to quit and get help)."""
    kept = list(keys)
    while width_of(tuple(kept)) > width:
        droppable = [i for i, k in enumerate(kept) if k[2] not in ESSENTIAL]
        if not droppable:
            break
        del kept[droppable[-1]]
    return tuple(kept)


class KeysFooter(Widget):
    """One line of keys and what they do, at the bottom of a screen."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"keys-footer--key", "keys-footer--description"}
    DEFAULT_CSS = """
    KeysFooter {
        dock: bottom;
        height: 1;
        background: $footer-background;
        & > .keys-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .keys-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._shown: Shown | None = None

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if shown_keys(screen) != self._shown:
            self.refresh()

    def render(self) -> Text:
        self._shown = shown_keys(self.screen)
        key_style = self.get_component_rich_style("keys-footer--key")
        description_style = self.get_component_rich_style("keys-footer--description")
        line = Text(no_wrap=True, overflow="crop", end="")
        for key, display, description in fitting(self._shown, self.size.width):
            pressed = Style.from_meta({"key": key.split(",")[0].strip()})
            line.append(f" {display} ", key_style + pressed)
            line.append(f"{description} ", description_style + pressed)
        return line

    def on_click(self, event: events.Click) -> None:
        key = event.style.meta.get("key")  # the key under the click, as drawn
        if isinstance(key, str):
            event.stop()
            self.app.simulate_key(key)
