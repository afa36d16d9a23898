"""Config strings (fairseq's parse_config_literal, which reads a checkpoint's stored config and
the command line's lists): bounded in size, depth and length."""

import pytest

CONFIG_BOMBS = [
    ("joined_repeats", "+".join(["[0] * 1000000"] * 20), "builds more than 1000000 items"),
    ("long_sum", "+".join(["1"] * 3000), "nested deeper than 100 levels"),
    ("unary_chain", "-" * 50_000 + "1", "nested deeper than 100 levels"),
    ("nested_lists", "[" * 150 + "]" * 150, "refusing to evaluate"),
    ("long_string", "1" + " " * 200_000, "characters long, more than 100000"),
    ("repeated_string", "'ab' * 400000 + 'c' * 400000", "builds more than 1000000 items"),
]


@pytest.mark.parametrize("value,expected", [c[1:] for c in CONFIG_BOMBS], ids=[c[0] for c in CONFIG_BOMBS])
def test_config_strings_are_bounded(value, expected):
    from fairseq.utils import ConfigLiteralError, parse_config_literal

    with pytest.raises(ConfigLiteralError, match=expected):
        parse_config_literal(value)


def test_config_strings_within_the_bounds_still_parse():
    from fairseq.utils import parse_config_literal

    assert parse_config_literal("[0] * 1000000") == [0] * 1000000
    assert parse_config_literal("+".join(["[(512, 3)]"] * 40)) == [(512, 3)] * 40
    assert parse_config_literal("-" * 40 + "1") == 1
