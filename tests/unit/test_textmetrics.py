"""The benchmark's text normalisation (bench/textmetrics.py): the same words, written with digits
or with Chinese numerals, score as equal."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from textmetrics import error_rate, zh_tokens  # noqa: E402


def test_percent_is_read_as_baifenzhi_before_the_number():
    assert "".join(zh_tokens("同比增长了12%")) == "同比增长了百分之十二"
    for hyp in ("同比增长了百分之十二", "同比增长了百分之12", "同比增长了12%"):
        assert error_rate("同比增长了12%，比预期要好", hyp + "比预期要好", "zh")[0] == 0.0


def test_numbers_as_digits_or_chinese_numerals():
    assert error_rate("营收是2300万元，影响了两千多个用户", "营收是两千三百万元影响了2000多个用户", "zh")[0] == 0.0
    assert error_rate("营收是2300万元", "营收是2400万元", "zh")[0] > 0.0
