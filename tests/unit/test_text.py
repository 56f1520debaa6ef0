"""Terminal text from data: every non-printable character escaped, the rest as it is."""

from __future__ import annotations

import pytest

from livesym.commands.text import text_lines
from livesym.printable import printable


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("std::vector<int>::push_back(int&&)", "std::vector<int>::push_back(int&&)"),
        ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),  # printable non-ASCII stays
        ("red\x1b[31m", "red\\x1b[31m"),
        ("two\nlines\r", "two\\nlines\\r"),
        ("tab\there", "tab\\there"),
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("csi\x9b2J", "csi\\x9b2J"),  # the C1 form of ESC [
        ("abc\u202edef", "abc\\u202edef"),  # a bidi override reorders what follows
        ("lib\udcff.so", "lib\\udcff.so"),  # a path byte that is not UTF-8 (surrogateescape)
    ],
)
def test_printable_escapes_what_a_terminal_would_act_on(raw, shown):
    assert printable(raw) == shown
    assert printable(shown) == shown  # an escaped text is left alone


def test_text_lines_ends_each_line_and_keeps_rows_apart():
    assert text_lines(["a", "b\nc"]) == "a\nb\\nc\n"
    assert text_lines([]) == ""


def test_record_progress_line_fits_every_width_and_drops_the_least_useful_parts_first() -> None:
    from livesym.commands.progress import progress_line

    path = "/var/tmp/captures/" + "x" * 60 + "/spin.json.gz"
    full = progress_line("recording", 4242, 12.5, 1234, 0, path, 400)
    assert full.startswith("recording pid 4242:") and full.endswith(f"-> {path} (Ctrl-C to stop)")
    for width in range(2, 200):
        line = progress_line("recording", 4242, 12.5, 1234, 0, path, width)
        assert len(line) <= max(1, width - 1), (width, line)
    assert progress_line("recording", 4242, 12.5, 1234, 0, path, 80).endswith("-> spin.json.gz")
    assert progress_line("recording", 4242, 12.5, 1234, 0, "a\x1bb", 200).count("\x1b") == 0


def test_top_s_progress_line_says_how_to_stop() -> None:
    from livesym.commands.progress import progress_line

    line = progress_line("sampling", 4242, 3.0, 300, 2, "", 80)
    assert line == "sampling pid 4242:   3.0 s, 300 samples, 2 lost (Ctrl-C to stop)"
    assert progress_line("sampling", 4242, 3.0, 300, 2, "", 30).endswith("…")
