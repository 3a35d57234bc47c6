"""MkDocs hook: the command-line reference, generated from the argparse parsers at build time.

A page holding the line ``<!-- cli-reference -->`` gets it replaced by one section per
subcommand of ``recpipe.cli.build_parser()`` (its usage, description and every option, with its
default), so the reference is as current as the parsers and is never committed as text.
Anchors are ``#recpipe-COMMAND``, e.g. ``reference/cli.md#recpipe-pack``.
"""

import argparse
import html
import re

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())


def cli_reference():
    from recpipe.cli import build_parser

    parser = build_parser()
    commands = _subcommands(parser)
    parts = ["## recpipe", "", _usage(parser), "", _escape(parser.description or ""), "",
             _options_table(parser), "", "| command | what it does |", "|---|---|"]
    parts += [f"| [`{name}`](#recpipe-{name}) | {_cell(help_text)} |"
              for name, help_text, _ in commands]
    parts.append("")
    for name, _, sub in commands:
        parts += _command_section(name, sub)
    return "\n".join(parts)


def _subcommands(parser):
    """``(name, one-line help, parser)`` of every subcommand, in name order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            return sorted((name, helps.get(name, ""), sub) for name, sub in action.choices.items())
    raise RuntimeError("recpipe's parser has no subcommands")


def _command_section(name, parser):
    lines = [f"## recpipe {name} {{#recpipe-{name}}}", "", _usage(parser), ""]
    if parser.description:
        lines += [_escape(parser.description), ""]
    lines += [_options_table(parser), ""]
    if parser.epilog:
        lines += [_escape(parser.epilog), ""]
    return lines


def _usage(parser):
    usage = parser.format_usage().strip()
    usage = re.sub(r"^usage: ", "", usage)
    return "```text\n" + usage + "\n```"


def _options_table(parser):
    formatter = parser._get_formatter()
    rows = []
    for group in parser._action_groups:
        for action in group._group_actions:
            if (action.help == argparse.SUPPRESS or isinstance(
                    action, (argparse._SubParsersAction, argparse._HelpAction))):
                continue
            rows.append(_row(formatter, action))
    if not rows:
        return ""
    return "\n".join(["| argument | default | what it does |", "|---|---|---|"] + rows)


def _row(formatter, action):
    if action.option_strings:
        names = ", ".join(
            f"`{option}`" if action.nargs == 0 else f"`{option} {_metavar(formatter, action)}`"
            for option in action.option_strings)
    else:
        names = f"`{_metavar(formatter, action)}`"
    help_text = formatter._expand_help(action) if action.help else ""
    listed = action.choices is not None and not isinstance(action.choices, dict)
    if listed and action.option_strings:
        help_text += f" (one of: {', '.join(map(str, action.choices))})"
    return f"| {names} | {_default(action)} | {_cell(help_text)} |"


def _metavar(formatter, action):
    if action.option_strings:
        return formatter._format_args(action, action.dest.upper())
    return formatter._format_args(action, action.dest)


def _default(action):
    default = action.default
    if (action.nargs == 0 or default is None or default is argparse.SUPPRESS or default == []
            or action.required):
        return ""
    return f"`{default}`"


def _escape(text):
    """Prose from the parsers, made safe for Markdown: no raw HTML, no accidental emphasis;
    text in backticks is kept as code."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # the parts outside backticks
        parts[i] = html.escape(parts[i], quote=False).replace("*", r"\*").replace("_", r"\_")
    if len(parts) % 2 == 0:  # an unpaired backtick: keep it literal
        parts[-2] += "\\`" + parts.pop()
    return "`".join(parts)


def _cell(text):
    return _escape(text).replace("|", r"\|")
