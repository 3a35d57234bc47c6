"""Help texts say what is so (issue 23, item 5): every option explained with its default, the
decoder list complete, examples that use the command's own flags, tables that explain their
columns."""

import argparse

import pytest

from recpipe.cli import build_parser
from recpipe.cli.options import DECODERS
from recpipe.cli.tune import format_report


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def _options():
    for name, sub in _subparsers().items():
        for action in sub._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                yield name, sub, action


@pytest.mark.parametrize("command, sub, action", [
    pytest.param(*option, id=f"{option[0]} {option[2].option_strings[-1]}")
    for option in _options()])
def test_every_option_has_help_that_states_its_default(command, sub, action):
    flag = action.option_strings[-1]
    assert action.help, f"recpipe {command} {flag} has no help"
    shows_defaults = sub.formatter_class is argparse.ArgumentDefaultsHelpFormatter
    silent = action.default in (None, False, [], argparse.SUPPRESS) or isinstance(
        action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
    if not shows_defaults and not silent:
        assert "default" in action.help, f"recpipe {command} {flag}: default not said"


def test_the_decoder_choices_are_the_library_decoders():
    from recpipe.decode.decoders import PREFERENCE, _BACKENDS

    assert DECODERS == ("auto",) + PREFERENCE and set(PREFERENCE) == set(_BACKENDS)
    for command in ("bench", "tune"):
        help_text = _subparsers()[command].format_help()
        assert all(name in help_text for name in DECODERS), command


def test_storage_option_examples_use_the_commands_own_flag():
    index_help = " ".join(_subparsers()["index"].format_help().split())
    assert "-o anon=true" not in index_help and "--storage-option anon=true" in index_help
    assert "-o anon=true" in " ".join(_subparsers()["inspect"].format_help().split())


def test_the_bench_table_explains_its_wait_column():
    from recpipe.cli.bench import format_table

    stages = {"read": 0.0, "decode": 4.0, "augment": 0.0, "batch": 0.01}
    results = {"file": "x.rec", "threads": 2, "batch_size": 8, "dtype": "uint8",
               "decoder": "turbojpeg", "bare_decode_images_per_s": 500.0, "peak_rss_mb": 90,
               "configs": {"val": {"images_per_s": 480.0, "vs_bare_decode": 0.96,
                                   "wait_fraction": 0.99, "stage_ms_per_image": stages,
                                   "gil_us_per_image": 30.0,
                                   "gil_ceiling_images_per_s": 33333.0}}}
    table = format_table(results)
    assert " 99%" in table and "wait: share of the run the consumer spent waiting" in table
    assert "~100% is expected here" in table


def test_tune_says_when_other_processes_hold_the_cores():
    report = {"threads": 2, "prefetch": 2, "reason": "CPU_SATURATED",
              "wait_fraction": {"before": 0.7, "after": 0.7}, "images_per_s_overall": 300.0,
              "windows": 5, "changes": 1, "settled_window": 2, "cores": 2,
              "cores_source": "affinity", "cpu_per_image": 0.001, "x_max_images_per_s": 2000.0,
              "cpu_util": 0.27, "run_queue_share": 0.8, "cpu_pressure_some_avg10": 90.0,
              "warnings": []}
    text = format_report(report)
    assert "process CPU 27.0% of the cores" in text
    assert ("CPU_SATURATED at process CPU 27%: other processes hold the cores (this process's "
            "threads waited for a CPU 80% of their runnable time; CPU pressure 90%)") in text
    assert "other processes" not in format_report(dict(report, cpu_util=0.95))
    assert "other processes" not in format_report(dict(report, reason="SETTLED"))
