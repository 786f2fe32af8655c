"""The console's plain-text helpers: data is never markup and never reaches the terminal raw."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from fvconsole.tui.plain import ControlPictures, PlainText, plain_content, safe_text, table_cell

CONTROL = "\x1b]0;pwned\x07\x1b[2J"


def test_plain_text_escapes_what_rich_would_pass_or_drop() -> None:
    text = PlainText("name: ").append(f"ck{CONTROL}\r", style="red")
    # Rich alone keeps ESC and silently drops BEL and CR.
    assert text.plain == "name: ck\\x1b]0;pwned\\x07\\x1b[2J\\x0d"
    assert [(s.start, s.end, s.style) for s in text.spans] == [(6, len(text.plain), "red")]


def test_plain_text_keeps_our_newlines() -> None:
    assert PlainText("a\nb").append("c\nd").plain == "a\nbc\nd"


def test_safe_text_keeps_each_style_on_what_it_styled() -> None:
    raw = Text("ok ")
    raw.append("a\x1bb", style="red")
    raw.append(" z", style="bold")
    clean = safe_text(raw)
    assert clean.plain == "ok a\\x1bb z"
    styled = {str(s.style): clean.plain[s.start:s.end] for s in clean.spans}
    assert styled == {"red": "a\\x1bb", "bold": " z"}


def test_safe_text_returns_clean_text_unchanged() -> None:
    text = Text("already fine [/] :smile:")
    assert safe_text(text) is text


def test_plain_content_never_parses_markup() -> None:
    shown = plain_content("[/]s52 [link=https://evil]x[/link]")
    assert isinstance(shown, Text) and shown.plain == "[/]s52 [link=https://evil]x[/link]" and not shown.spans


def test_table_cells() -> None:
    assert table_cell("4095") == "4095"  # plain cells stay cheap strings
    for value in ("[/]s52", "[link=https://evil]x[/link]", ":warning:", f"id{CONTROL}"):
        cell = table_cell(value)
        assert isinstance(cell, Text) and not cell.spans
        assert cell.plain == value.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    styled = table_cell(Text("in\x1bvalid", style="bold red"))
    assert styled.plain == "in\\x1bvalid" and str(styled.style) == "bold red"


def test_control_pictures_keep_the_length() -> None:
    text = Text("/runs/a\x1bb\u202ec\x7f")
    shown = ControlPictures()(text)
    assert shown.plain == "/runs/a\u241bb\ufffdc\u2421"
    assert len(shown.plain) == len(text.plain)


@given(st.text())
def test_no_raw_control_survives(value: str) -> None:
    for shown in (PlainText(value).plain, PlainText().append(value).plain, safe_text(Text(value)).plain,
                  str(table_cell(value))):
        assert not any(ord(ch) < 0x20 and ch != "\n" or 0x7F <= ord(ch) <= 0x9F for ch in shown), repr(shown)


def test_a_table_draws_every_cell_plain_a_new_columns_default_too() -> None:
    # FastTable shows a string cell as written, never through Rich's markup parser, its controls
    # escaped (plain.table_cell); a column's default, which the table stores for the rows
    # already there without add_row, goes through table_cell too.
    import asyncio

    from textual.app import App

    from fvconsole.tui.widgets.tables import FastTable

    class One(App[None]):
        def compose(self):
            yield FastTable(id="t")

    async def main() -> list[str]:
        app = One()
        async with app.run_test(size=(120, 6)) as pilot:
            table = app.query_one(FastTable)
            table.add_column("id", key="id", width=24)
            table.add_row("[/]s52 :warning:", key="a")
            table.add_row("plain-0001", key="b")
            table.add_column("note", key="note", width=40, default=f"[b]x{CONTROL}")
            await pilot.pause()
            return [table.render_line(y).text for y in (1, 2)]

    first, second = asyncio.run(main())
    assert "[/]s52 :warning:" in first and "plain-0001" in second
    for line in (first, second):
        assert "[b]x\\x1b]0;pwned\\x07\\x1b[2J" in line and "\x1b" not in line and "\x07" not in line
